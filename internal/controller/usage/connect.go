// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package usage

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	authorizationv1client "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/amphitheatre-app/timeout-controller/internal/controller/kube"
	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
)

// ConnectPath is where the connection webhook is served.
const ConnectPath = "/connect"

// connectUses counts the connections seen at admission by what became of
// them.
var connectUses = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "timeout_controller_connect_uses_total",
	Help: "Connections to Pods (exec, attach, port-forward) seen by the admission webhook, by result: recorded (a write of last-active), unverified (the API server does not let the user the request names connect to the Pod so: a request it did not send), throttled (the object's use was recorded less than its activity window ago), ungoverned (no policy with an idle clock or sleep governs the Pod or an owner), dropped (the queue was full), failed (the API server did not answer a read or a SubjectAccessReview).",
}, []string{"result"})

func init() {
	ctrlmetrics.Registry.MustRegister(connectUses)
	// Every series from the start, so that an alert on an increase of
	// unverified sees the first one.
	for _, result := range []string{"recorded", "unverified", "throttled", "ungoverned", "dropped", "failed"} {
		connectUses.WithLabelValues(result)
	}
}

// Defaults of Connections.
const (
	// connectQueue is how many connections wait to be recorded; more are
	// dropped, which at worst records a use one window later.
	connectQueue = 1024
	// connectWorkers record connections at once: each takes a few round
	// trips to the API server, and a burst of execs into sleeping
	// environments (Monday morning) must not wait in line for them. Two
	// connections to one object at once write once: each write reads the
	// object and is locked on what it read.
	connectWorkers = 32
	// resolveTTL is how long the governed object found for a Pod is
	// trusted: a new policy or owner counts within this time.
	resolveTTL = 30 * time.Second
	// resolveRetry is how long a Pod whose owners could not be read is
	// left alone.
	resolveRetry = 5 * time.Second
	// connectCacheLimit bounds both caches, whatever the cluster's size.
	connectCacheLimit = 4096
	// maxOwnerDepth bounds the owner chain followed from a Pod, and from
	// its namespace.
	maxOwnerDepth = 5
)

// Connections is the validating admission webhook for connections to
// Pods (CONNECT on pods/exec, pods/attach, pods/portforward): it allows
// every one at once, and records it, later and at most once per activity
// window, as use of the governed object that owns the Pod (the Pod's
// owners first, then its namespace and the namespace's owners). It
// records nothing before the API server has said, in a
// SubjectAccessReview, that the user the request names may make that
// connection: anyone who reaches the webhook's port can send it a
// request. It runs on every replica, leader or not.
type Connections struct {
	// Reader reads metadata from the API server, uncached: a Pod, its
	// owners, its namespace are read once per resolveTTL, and no informer
	// grows with the cluster.
	Reader client.Reader
	// Policies lists the TimeoutPolicies (the manager's cached client).
	Policies client.Reader
	// Writer patches the governed object.
	Writer client.Writer
	// Reviews asks whether a connection's user may make it.
	Reviews authorizationv1client.SubjectAccessReviewInterface
	Clock   clock.PassiveClock

	queue    chan connection
	reviewed *kube.TTLCache[reviewKey, verdict]
	resolved *kube.TTLCache[types.NamespacedName, governedObject]
	// recorded holds, per governed object, the last-active time known on
	// it, until a new use is worth a write.
	recorded *kube.TTLCache[types.UID, time.Time]
}

// connection is one connection seen at admission: to pod's subresource,
// by user.
type connection struct {
	pod         types.NamespacedName
	subresource string
	user        authenticationv1.UserInfo
	use         expiry.Use
}

// governedObject is what a Pod's use is recorded on; UID is empty when
// no policy governs the Pod or its owners, and window is zero when the
// governing policy does not follow use.
type governedObject struct {
	gvk    schema.GroupVersionKind
	key    types.NamespacedName
	uid    types.UID
	policy string
	window time.Duration
}

// NewConnections returns the webhook, which needs Start to record.
func NewConnections(reader, policies client.Reader, writer client.Writer, reviews authorizationv1client.SubjectAccessReviewInterface, clk clock.PassiveClock) *Connections {
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &Connections{
		Reader: reader, Policies: policies, Writer: writer, Reviews: reviews, Clock: clk,
		queue:    make(chan connection, connectQueue),
		reviewed: kube.NewTTLCache[reviewKey, verdict](clk, connectCacheLimit),
		resolved: kube.NewTTLCache[types.NamespacedName, governedObject](clk, connectCacheLimit),
		recorded: kube.NewTTLCache[types.UID, time.Time](clk, connectCacheLimit),
	}
}

// connectVia is the Via of a connection request, or false for any other
// request.
func connectVia(req *admissionv1.AdmissionRequest) (string, bool) {
	if req.Operation != admissionv1.Connect || req.Resource.Group != "" || req.Resource.Resource != "pods" {
		return "", false
	}
	switch req.SubResource {
	case "exec":
		return expiry.ViaExec, true
	case "attach":
		return expiry.ViaAttach, true
	case "portforward":
		return expiry.ViaPortForward, true
	}
	return "", false
}

// Handle allows the request, and queues its use to be recorded unless
// it is a dry run. It never waits: a full queue drops the use.
func (c *Connections) Handle(_ context.Context, req admission.Request) admission.Response {
	via, ok := connectVia(&req.AdmissionRequest)
	if ok && (req.DryRun == nil || !*req.DryRun) && req.Name != "" {
		conn := connection{
			pod:         types.NamespacedName{Namespace: req.Namespace, Name: req.Name},
			subresource: req.SubResource,
			user:        req.UserInfo,
			use:         expiry.Use{At: c.Clock.Now(), Via: via, By: req.UserInfo.Username},
		}
		select {
		case c.queue <- conn:
		default:
			connectUses.WithLabelValues("dropped").Inc()
		}
	}
	return admission.Allowed("")
}

// NeedLeaderElection is false: every replica serves the webhook, and so
// records what it is asked about.
func (c *Connections) NeedLeaderElection() bool { return false }

// Start records the queued connections, connectWorkers at a time, until
// ctx is done.
func (c *Connections) Start(ctx context.Context) error {
	log := logf.FromContext(ctx).WithValues("controller", "connect")
	ctx = logf.IntoContext(ctx, log)
	var wg sync.WaitGroup
	for range connectWorkers {
		wg.Go(func() {
			for {
				select {
				case <-ctx.Done():
					return
				case conn := <-c.queue:
					outcome, err := c.record(ctx, conn)
					if err != nil {
						log.Error(err, "record a connection as use", "pod", conn.pod, "via", conn.use.Via)
					}
					connectUses.WithLabelValues(outcome).Inc()
				}
			}
		})
	}
	wg.Wait()
	return nil
}

// record writes conn's use on the governed object that owns its Pod, once
// the API server has said its user may make it, and returns the outcome
// counted.
func (c *Connections) record(ctx context.Context, conn connection) (string, error) {
	switch v, err := c.verify(ctx, conn); {
	case err != nil || v == unanswered:
		return "failed", err
	case v == unverified:
		logf.FromContext(ctx).V(1).Info("connection not recorded: the user named may not make it", "pod", conn.pod, "via", conn.use.Via)
		return "unverified", nil
	}
	g, ok := c.resolved.Get(conn.pod)
	// read is the governed object as resolving the Pod's owners just read
	// it, which the write starts from; a governed object found in the
	// cache is read again.
	var read *metav1.PartialObjectMetadata
	if !ok {
		var err error
		if g, read, err = c.resolve(ctx, conn.pod); err != nil {
			// The connections to this Pod in the next few seconds are not
			// recorded either, rather than each failing (and logging) alike.
			c.resolved.Put(conn.pod, governedObject{}, conn.use.At.Add(resolveRetry))
			return "failed", err
		}
		c.resolved.Put(conn.pod, g, conn.use.At.Add(resolveTTL))
	}
	if g.uid == "" || g.window <= 0 {
		return "ungoverned", nil
	}
	if last, ok := c.recorded.Get(g.uid); ok && conn.use.At.Before(last.Add(g.window)) {
		return "throttled", nil
	}
	last, wrote, err := c.write(ctx, g, conn.use, read)
	if err != nil {
		return "failed", err
	}
	c.recorded.Put(g.uid, last, last.Add(g.window))
	if !wrote {
		return "throttled", nil
	}
	logf.FromContext(ctx).V(1).Info("connection recorded as use", "object", g.key, "kind", g.gvk.Kind, "via", conn.use.Via, "policy", g.policy)
	return "recorded", nil
}

// write records use on g, read fresh (the first time, read when it is
// not nil: g as this record just read it), unless its last-active is
// already within the window before the use (another replica, or any
// client, wrote it). It returns the last-active now on the object and
// whether it wrote. Only last-active and last-use are written, on the
// object read (its UID and resourceVersion), so that the write never
// moves a later last-active back.
func (c *Connections) write(ctx context.Context, g governedObject, use expiry.Use, read *metav1.PartialObjectMetadata) (time.Time, bool, error) {
	use.At = use.At.UTC().Truncate(time.Second)
	for range 3 {
		obj := read
		read = nil
		if obj == nil {
			obj = kube.NewMetadata(g.gvk)
			if err := c.Reader.Get(ctx, g.key, obj); err != nil {
				if apierrors.IsNotFound(err) {
					return use.At, false, nil
				}
				return time.Time{}, false, fmt.Errorf("get %s %s: %w", g.gvk.Kind, g.key, err)
			}
		}
		if obj.UID != g.uid {
			return use.At, false, nil
		}
		if t, err := time.Parse(time.RFC3339, strings.TrimSpace(obj.Annotations[expiry.AnnotationLastActive])); err == nil && use.At.Before(t.Add(g.window)) {
			return t, false, nil
		}
		patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
			"uid": obj.UID, "resourceVersion": obj.ResourceVersion,
			"annotations": use.Annotations(),
		}})
		if err != nil {
			return time.Time{}, false, err
		}
		err = c.Writer.Patch(ctx, obj, client.RawPatch(types.MergePatchType, patch))
		switch {
		case err == nil:
			return use.At, true, nil
		case apierrors.IsNotFound(err):
			return use.At, false, nil
		case !apierrors.IsConflict(err):
			return time.Time{}, false, fmt.Errorf("record use of %s %s: %w", g.gvk.Kind, g.key, err)
		}
	}
	return time.Time{}, false, fmt.Errorf("record use of %s %s: it kept changing", g.gvk.Kind, g.key)
}

// The connection webhook reads the metadata of Pods and of the owners it
// follows; each further owner kind needs get too (docs/reference/webhook.md).
// +kubebuilder:rbac:groups="",resources=pods,verbs=get
// +kubebuilder:rbac:groups=apps,resources=replicasets;deployments;statefulsets;daemonsets,verbs=get
// +kubebuilder:rbac:groups=batch,resources=jobs;cronjobs,verbs=get
// +kubebuilder:rbac:groups=amphitheatre.app,resources=actors,verbs=get
// It asks whether the user a request names may make the connection.
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// SetupConnections serves the connection webhook on mgr's webhook server
// and records what it sees, on every replica.
func SetupConnections(mgr manager.Manager, clk clock.PassiveClock) error {
	reviews, err := authorizationv1client.NewForConfigAndClient(mgr.GetConfig(), mgr.GetHTTPClient())
	if err != nil {
		return fmt.Errorf("create the connection review client: %w", err)
	}
	c := NewConnections(mgr.GetAPIReader(), mgr.GetClient(), mgr.GetClient(), reviews.SubjectAccessReviews(), clk)
	mgr.GetWebhookServer().Register(ConnectPath, &admission.Webhook{Handler: c})
	if err := mgr.Add(c); err != nil {
		return fmt.Errorf("add the connection recorder: %w", err)
	}
	return nil
}
