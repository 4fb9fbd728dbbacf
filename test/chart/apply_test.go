// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package chart

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// fieldManager applies the rendered objects, as Helm's server-side apply
// would.
const fieldManager = "chart-test"

var (
	policyResource  = schema.GroupVersionResource{Group: "timeout.amphitheatre.app", Version: "v1alpha1", Resource: "timeoutpolicies"}
	channelResource = schema.GroupVersionResource{Group: "timeout.amphitheatre.app", Version: "v1alpha1", Resource: "notificationchannels"}
)

// server is the API server the rendered objects are applied to, started
// by the first test that needs it and stopped by TestMain.
var server struct {
	once     sync.Once
	err      error
	env      *envtest.Environment
	dyn      dynamic.Interface
	mapper   meta.RESTMapper
	warnings *warnings
}

func TestMain(m *testing.M) {
	code := m.Run()
	if server.env != nil {
		if err := server.env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stop control plane:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// warnings collects the warnings the API server returns, such as those of
// Pod Security admission about a pod template.
type warnings struct {
	mu   sync.Mutex
	list []string
}

func (w *warnings) HandleWarningHeader(code int, agent, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.list = append(w.list, text)
}

// take returns the warnings since the last call.
func (w *warnings) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	l := w.list
	w.list = nil
	return l
}

// apiServer starts kube-apiserver and etcd with the chart's CRDs, the
// Amphitheatre CRDs and a stand-in for the ServiceMonitor CRD installed,
// and the release namespace enforcing the restricted Pod Security
// Standard.
func apiServer(t *testing.T) {
	t.Helper()
	server.once.Do(func() { server.err = startAPIServer() })
	if server.err != nil {
		t.Fatal(server.err)
	}
}

func startAPIServer() error {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		return fmt.Errorf("KUBEBUILDER_ASSETS is not set: run `make test`, which builds the control plane (make control-plane) and sets it")
	}
	server.env = &envtest.Environment{
		CRDDirectoryPaths: []string{
			filepath.Join(chartDir, "crds"),
			filepath.Join(root, "third_party", "amphitheatre", "crds"),
			filepath.Join("testdata", "crds"),
		},
		ErrorIfCRDPathMissing: true,
	}
	cfg, err := server.env.Start()
	if err != nil {
		return fmt.Errorf("start control plane: %w", err)
	}
	cfg = rest.CopyConfig(cfg)
	server.warnings = &warnings{}
	cfg.WarningHandler = server.warnings
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return err
	}
	if server.mapper, err = servedKinds(cfg, httpClient, server.env.CRDs); err != nil {
		return err
	}
	if server.dyn, err = dynamic.NewForConfigAndClient(cfg, httpClient); err != nil {
		return err
	}
	clients, err := kubernetes.NewForConfigAndClient(cfg, httpClient)
	if err != nil {
		return err
	}
	_, err = clients.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{
			Name: namespace,
			// As docs/guides/install-helm.md recommends; the API server then warns about
			// every pod template that would not run here.
			Labels: map[string]string{
				"pod-security.kubernetes.io/enforce": "restricted",
				"pod-security.kubernetes.io/warn":    "restricted",
			},
		},
	}, metav1.CreateOptions{})
	return err
}

// servedKinds returns a RESTMapper once it maps every kind of crds. The
// API server serves a new CRD's kind in its discovery a moment after the
// CRD is established, which envtest waits for: on a loaded machine, a
// mapper made at once does not know the kind yet.
func servedKinds(cfg *rest.Config, httpClient *http.Client, crds []*apiextensionsv1.CustomResourceDefinition) (meta.RESTMapper, error) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		mapper, err := apiutil.NewDynamicRESTMapper(cfg, httpClient)
		if err != nil {
			return nil, err
		}
		var missing []string
		for _, crd := range crds {
			for _, v := range crd.Spec.Versions {
				if !v.Served {
					continue
				}
				if _, err := mapper.RESTMapping(schema.GroupKind{Group: crd.Spec.Group, Kind: crd.Spec.Names.Kind}, v.Name); err != nil {
					missing = append(missing, crd.Spec.Names.Kind+"."+crd.Spec.Group+"/"+v.Name)
				}
			}
		}
		if len(missing) == 0 {
			return mapper, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("the API server does not serve %s 30s after their CRDs were established", strings.Join(missing, ", "))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// apply server-side applies obj with Strict field validation, so that an
// unknown or duplicated field is an error rather than silently dropped,
// and returns what the API server stored and the warnings it returned.
func apply(t *testing.T, obj *unstructured.Unstructured, dryRun bool) (*unstructured.Unstructured, []string, error) {
	t.Helper()
	gvk := obj.GroupVersionKind()
	mapping, err := server.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return nil, nil, fmt.Errorf("%s %s: the API server does not serve it: %w", gvk.Kind, obj.GetName(), err)
	}
	var ri dynamic.ResourceInterface = server.dyn.Resource(mapping.Resource)
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		if obj.GetNamespace() != namespace {
			return nil, nil, fmt.Errorf("%s %s is in namespace %q, want the release namespace %q", gvk.Kind, obj.GetName(), obj.GetNamespace(), namespace)
		}
		ri = server.dyn.Resource(mapping.Resource).Namespace(namespace)
	} else if obj.GetNamespace() != "" {
		return nil, nil, fmt.Errorf("%s %s is cluster-scoped but names namespace %q", gvk.Kind, obj.GetName(), obj.GetNamespace())
	}
	data, err := json.Marshal(obj)
	if err != nil {
		return nil, nil, err
	}
	force := true
	opts := metav1.PatchOptions{FieldManager: fieldManager, Force: &force, FieldValidation: "Strict"}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	// A mutating admission policy of the chart's (the author stamp) matches
	// TimeoutPolicies: the API server serves it a new CRD's schema a while
	// after the CRD is established, and refuses the request with 503 until
	// then.
	deadline := time.Now().Add(time.Minute)
	for {
		server.warnings.take()
		stored, err := ri.Patch(context.Background(), obj.GetName(), types.ApplyPatchType, data, opts)
		if apierrors.IsServiceUnavailable(err) && strings.Contains(err.Error(), "CustomResourceDefinitions are created") && time.Now().Before(deadline) {
			time.Sleep(500 * time.Millisecond)
			continue
		}
		return stored, server.warnings.take(), err
	}
}

func TestTheAPIServerAcceptsEveryRenderedObject(t *testing.T) {
	apiServer(t)
	for _, v := range valueSets {
		t.Run(v.name, func(t *testing.T) {
			objs := objects(t, mustRender(t, v))
			if len(objs) == 0 {
				t.Fatal("the chart rendered nothing")
			}
			// Each value set's policy is created afresh: applied over the
			// previous set's, an emptied reminders list would be dropped by
			// server-side apply and defaulted back to ["3d", "2d"].
			err := server.dyn.Resource(policyResource).Delete(context.Background(), "playbooks", metav1.DeleteOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				t.Fatal(err)
			}
			policies := 0
			for _, o := range objs {
				stored, warns, err := apply(t, o, false)
				if err != nil {
					t.Errorf("%s %s refused: %v", o.GetKind(), o.GetName(), err)
					continue
				}
				if len(warns) > 0 {
					t.Errorf("%s %s: the API server warns: %s", o.GetKind(), o.GetName(), strings.Join(warns, "; "))
				}
				if o.GetKind() == "TimeoutPolicy" {
					policies++
					checkPolicyStored(t, o, stored)
				}
			}
			if policies != 1 {
				t.Errorf("rendered %d TimeoutPolicies, want 1", policies)
			}
		})
	}
}

// checkPolicyStored checks that the API server kept every field of the
// rendered policy as rendered: none was pruned as unknown.
func checkPolicyStored(t *testing.T, rendered, stored *unstructured.Unstructured) {
	t.Helper()
	var check func(path string, want, got any)
	check = func(path string, want, got any) {
		switch w := want.(type) {
		case map[string]any:
			g, ok := got.(map[string]any)
			if !ok {
				t.Errorf("TimeoutPolicy %s: stored %#v, rendered %#v", path, got, want)
				return
			}
			for k := range w {
				check(path+"."+k, w[k], g[k])
			}
		case []any:
			g, ok := got.([]any)
			if !ok || len(g) != len(w) {
				t.Errorf("TimeoutPolicy %s: stored %#v, rendered %#v", path, got, want)
				return
			}
			for i := range w {
				check(fmt.Sprintf("%s[%d]", path, i), w[i], g[i])
			}
		default:
			if !reflect.DeepEqual(normalise(want), normalise(got)) {
				t.Errorf("TimeoutPolicy %s: stored %#v, rendered %#v", path, got, want)
			}
		}
	}
	check("spec", rendered.Object["spec"], stored.Object["spec"])
}

// normalise makes the integers of YAML and of JSON comparable.
func normalise(v any) any {
	switch n := v.(type) {
	case int:
		return int64(n)
	case float64:
		if n == float64(int64(n)) {
			return int64(n)
		}
	}
	return v
}

// The checks above can only fail if the API server validates: these make
// sure it does.
func TestTheChecksCanFail(t *testing.T) {
	apiServer(t)
	objs := objects(t, mustRender(t, valueSets[0]))

	t.Run("a TimeoutPolicy with a lifetime in words is refused by the CRD's validation", func(t *testing.T) {
		p := find(objs, "TimeoutPolicy", "playbooks").DeepCopy()
		if err := unstructured.SetNestedField(p.Object, "14 days", "spec", "defaultTTL"); err != nil {
			t.Fatal(err)
		}
		_, _, err := apply(t, p, true)
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.defaultTTL") {
			t.Fatalf("got %v, want Invalid naming spec.defaultTTL", err)
		}
	})

	t.Run("an unknown field is refused", func(t *testing.T) {
		p := find(objs, "TimeoutPolicy", "playbooks").DeepCopy()
		if err := unstructured.SetNestedField(p.Object, "14d", "spec", "defaultTtl"); err != nil {
			t.Fatal(err)
		}
		if _, _, err := apply(t, p, true); err == nil || !strings.Contains(err.Error(), "defaultTtl") {
			t.Fatalf("got %v, want an error naming defaultTtl", err)
		}
	})

	t.Run("a pod template on the host network gets a Pod Security warning", func(t *testing.T) {
		d := find(objs, "Deployment", "timeout-controller").DeepCopy()
		if err := unstructured.SetNestedField(d.Object, true, "spec", "template", "spec", "hostNetwork"); err != nil {
			t.Fatal(err)
		}
		_, warns, err := apply(t, d, true)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(strings.Join(warns, "\n"), "PodSecurity") {
			t.Fatalf("got warnings %q, want a PodSecurity warning", warns)
		}
	})
}
