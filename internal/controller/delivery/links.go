// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package delivery

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/actions"
	"github.com/amphitheatre-app/timeout-controller/internal/controller/eval"
	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
	"github.com/amphitheatre-app/timeout-controller/internal/notify"
)

// Links signs the links that messages carry when the controller runs
// with --actions-url (docs/guides/acting-from-messages.md): every
// reminder, sleeping and slept message, and each owner's digest, gets for
// each recipient links to the actions server's pages, signed with the
// newest key of the keyring Secret in the controller's namespace.
type Links struct {
	base      *url.URL
	reader    client.Reader
	writer    client.Writer
	namespace string
	clock     clock.PassiveClock

	mu     sync.Mutex
	ring   *actions.Keyring
	readAt time.Time
}

// LinkLifetime bounds how long a link works: no longer than the object
// lives, and no more than a week, whatever a reminder's lead.
const LinkLifetime = 7 * expiry.Day

// keyringTTL is how long the keyring read from its Secret is used before
// it is read again: a key added or removed takes effect within it.
const keyringTTL = time.Minute

// NewLinks returns the links of the actions server at rawURL, with the
// keyring Secret read from reader and, when missing, created through
// writer in namespace.
func NewLinks(rawURL string, reader client.Reader, writer client.Writer, namespace string, clk clock.PassiveClock) (*Links, error) {
	base, err := ParseActionsURL(rawURL)
	if err != nil {
		return nil, err
	}
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &Links{base: base, reader: reader, writer: writer, namespace: namespace, clock: clk}, nil
}

// ParseActionsURL checks the actions server's public address: an absolute
// https URL (http only on the loopback host, for tests), without user,
// query or fragment, since links are made by adding to its path.
func ParseActionsURL(raw string) (*url.URL, error) {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil {
		return nil, fmt.Errorf("%q is not a URL", raw)
	}
	switch {
	case u.Host == "" || !u.IsAbs():
		return nil, fmt.Errorf("%q: want an absolute URL such as https://timeout.example.com", raw)
	case u.User != nil || u.RawQuery != "" || u.Fragment != "":
		return nil, fmt.Errorf("%q: want no user, query or fragment", raw)
	case u.Scheme == "https":
	case u.Scheme == "http" && loopback(u.Hostname()):
		// A test on this machine: nothing crosses a network.
	case u.Scheme == "http":
		return nil, fmt.Errorf("%q: links carry capabilities and must use https (http only for localhost)", raw)
	default:
		return nil, fmt.Errorf("%q: want an https URL", raw)
	}
	u.Path = strings.TrimRight(u.Path, "/")
	return u, nil
}

func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// keyring returns the keyring, read from its Secret at most keyringTTL
// ago, creating the Secret with a fresh key when there is none. When the
// Secret cannot be read, the keyring read last goes on signing.
func (l *Links) keyring(ctx context.Context) (*actions.Keyring, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.clock.Now()
	if l.ring != nil && now.Sub(l.readAt) < keyringTTL {
		return l.ring, nil
	}
	ring, err := l.readKeyring(ctx, now)
	if err != nil {
		if l.ring == nil {
			return nil, err
		}
		logf.FromContext(ctx).Error(err, "read the links keyring again; signing with the keys read before")
		l.readAt = now
		return l.ring, nil
	}
	l.ring, l.readAt = ring, now
	return ring, nil
}

func (l *Links) readKeyring(ctx context.Context, now time.Time) (*actions.Keyring, error) {
	key := types.NamespacedName{Namespace: l.namespace, Name: actions.SecretName}
	s := &corev1.Secret{}
	err := l.reader.Get(ctx, key, s)
	if apierrors.IsNotFound(err) {
		fresh, ferr := actions.NewKeyringSecret(l.namespace, now)
		if ferr != nil {
			return nil, ferr
		}
		err = l.writer.Create(ctx, fresh)
		switch {
		case err == nil:
			logf.FromContext(ctx).Info("links keyring created", "secret", key.String())
			s = fresh
		case apierrors.IsAlreadyExists(err):
			// Another replica made it first: use theirs.
			err = l.reader.Get(ctx, key, s)
		default:
			return nil, fmt.Errorf("create the links keyring Secret %s: %w", key, err)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("read the links keyring Secret %s: %w", key, err)
	}
	return actions.KeyringFromSecret(s)
}

// objectLinks returns the Linker of a message of type t about the object
// of ev, whose deletion it announces at at, or nil when the message
// carries no links: a type nobody acts on, or no keyring to sign with
// (logged; the message goes without links rather than not at all).
func (l *Links) objectLinks(ctx context.Context, ev *eval.Evaluation, t v1alpha1.EventType, at time.Time) notify.Linker {
	if l == nil || (t != v1alpha1.EventReminder && t != v1alpha1.EventSleeping && t != v1alpha1.EventSlept) {
		return nil
	}
	deletion := at
	if ev.Life.ExpiresAt.After(deletion) {
		// A sleeping message's time is the sleep's.
		deletion = ev.Life.ExpiresAt
	}
	expires := linkExpiry(ev.Now, deletion)
	if !expires.After(ev.Now) {
		return nil
	}
	ring, err := l.keyring(ctx)
	if err != nil {
		logf.FromContext(ctx).Error(err, "messages go without links until the links keyring can be read")
		return nil
	}
	gv := ev.Key.GVK.GroupVersion()
	return objectLinker{links: l, ring: ring, step: stepText(ev.Schedule), claims: actions.Claims{
		Object: &actions.Ref{Group: gv.Group, Version: gv.Version, Kind: ev.Key.GVK.Kind,
			Namespace: ev.Obj.Namespace, Name: ev.Obj.Name, UID: ev.Obj.UID},
		Actions: objectActions(ev, t),
		Expires: expires,
	}}
}

// digestLinks returns the Linker of an owner's digest under policy p, or
// nil when it carries no links.
func (l *Links) digestLinks(ctx context.Context, p *v1alpha1.TimeoutPolicy, m notify.Message) notify.Linker {
	if l == nil || m.Digest == nil {
		return nil
	}
	ring, err := l.keyring(ctx)
	if err != nil {
		logf.FromContext(ctx).Error(err, "messages go without links until the links keyring can be read")
		return nil
	}
	schedule, err := expiry.NewSchedule(p.Spec)
	if err != nil {
		// The policy's status says what is wrong; its objects' digests
		// go out without links meanwhile.
		return nil
	}
	allowed := policyActions(schedule)
	dl := digestLinker{links: l, ring: ring, step: stepText(schedule)}
	var last time.Time
	for _, item := range m.Digest.Items {
		gv, err := schema.ParseGroupVersion(item.Object.APIVersion)
		if err != nil {
			return nil
		}
		dl.items = append(dl.items, actions.Claims{
			Object: &actions.Ref{Group: gv.Group, Version: gv.Version, Kind: item.Object.Kind,
				Namespace: item.Object.Namespace, Name: item.Object.Name, UID: item.Object.UID},
			Actions: allowed,
			Expires: linkExpiry(m.Time, item.ExpiresAt),
		})
		last = later(last, item.ExpiresAt)
	}
	if m.Digest.Owner != "" {
		// The owner's page lists objects of other policies too: each
		// action there is judged by the object's own policy.
		dl.owner = &actions.Claims{Owner: m.Digest.Owner, Actions: []actions.Action{actions.View, actions.Extend, actions.Wake, actions.Delete},
			Expires: linkExpiry(m.Time, last)}
	}
	return dl
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// linkExpiry is when a link sent at now about an object deleted at
// deletion stops working: at the deletion, and within linkLifetime, in
// whole seconds.
func linkExpiry(now, deletion time.Time) time.Time {
	end := now.Add(LinkLifetime)
	if deletion.Before(end) {
		end = deletion
	}
	return end.Truncate(time.Second)
}

// objectActions are what the links of a message of type t about the
// object of ev allow: its page always; keeping it longer unless the
// extension limits or maxTTL leave no room; waking it when it sleeps or
// is about to; deleting it when the policy allows that.
func objectActions(ev *eval.Evaluation, t v1alpha1.EventType) []actions.Action {
	out := []actions.Action{actions.View}
	if canExtend(ev) {
		out = append(out, actions.Extend)
	}
	if t == v1alpha1.EventSleeping || t == v1alpha1.EventSlept || ev.Life.Sleep.Sleeping() {
		out = append(out, actions.Wake)
	}
	if ev.Schedule.DeleteNow {
		out = append(out, actions.Delete)
	}
	return out
}

// canExtend reports whether a link could extend the object of ev now:
// it is not kept, has extensions left, and is short of maxTTL. The
// actions server judges again when the link is used.
func canExtend(ev *eval.Evaluation) bool {
	life, limits := ev.Life, ev.Schedule.Limits
	if life.Keep || (!life.Max.IsZero() && !life.ExpiresAt.Before(life.Max)) {
		return false
	}
	if limits == nil || limits.MaxCount < 0 {
		return true
	}
	used := 0
	if life.Extensions != nil {
		used = life.Extensions.Used
	}
	return used < limits.MaxCount
}

// policyActions are what the links in a digest allow under a policy,
// whose objects' states the digest does not read: the actions server
// judges each when it is used.
func policyActions(s expiry.Schedule) []actions.Action {
	out := []actions.Action{actions.View}
	if s.Limits == nil || s.Limits.MaxCount != 0 {
		out = append(out, actions.Extend)
	}
	if s.DeleteNow {
		out = append(out, actions.Delete)
	}
	return out
}

// stepText says the policy's link step for people: "1 day", "12 hours".
func stepText(s expiry.Schedule) string {
	step := s.LinkStep()
	switch {
	case step%expiry.Day == 0:
		return notify.Plural(int(step/expiry.Day), "day")
	case step%time.Hour == 0:
		return notify.Plural(int(step/time.Hour), "hour")
	case step%time.Minute == 0:
		return notify.Plural(int(step/time.Minute), "minute")
	}
	return expiry.FormatDuration(step)
}

// objectLinker signs one object's links for each recipient of a message.
type objectLinker struct {
	links  *Links
	ring   *actions.Keyring
	claims actions.Claims
	step   string
}

func (o objectLinker) Link(m notify.Message, recipient string) (notify.Message, error) {
	l, err := o.links.sign(o.ring, o.claims, recipient, o.step)
	if err != nil {
		return m, err
	}
	m.Actions = l
	return m, nil
}

// digestLinker signs a digest's links for its recipient: each object's,
// and the owner's page.
type digestLinker struct {
	links *Links
	ring  *actions.Keyring
	// items are the claims of the digest's objects, in its order.
	items []actions.Claims
	owner *actions.Claims
	step  string
}

func (d digestLinker) Link(m notify.Message, recipient string) (notify.Message, error) {
	if m.Digest == nil || len(m.Digest.Items) != len(d.items) {
		return m, errors.New("the digest's objects are not those its links were made for")
	}
	digest := *m.Digest
	digest.Items = append([]notify.DigestItem(nil), m.Digest.Items...)
	for i := range digest.Items {
		l, err := d.links.sign(d.ring, d.items[i], recipient, d.step)
		if err != nil {
			return m, err
		}
		digest.Items[i].Actions = l
	}
	m.Digest = &digest
	if d.owner != nil {
		l, err := d.links.sign(d.ring, *d.owner, recipient, "")
		if err != nil {
			return m, err
		}
		m.Actions = l
	}
	return m, nil
}

// sign returns the links of claims for recipient.
func (l *Links) sign(ring *actions.Keyring, c actions.Claims, recipient, step string) (*notify.Links, error) {
	c.Recipient = recipient
	c.ID = ""
	urls, err := ring.Links(l.base, c)
	if err != nil {
		return nil, err
	}
	out := &notify.Links{Page: urls.Page, Extend: urls.Extend, Wake: urls.Wake, Delete: urls.Delete}
	out.Token = urls.Page[strings.LastIndexByte(urls.Page, '/')+1:]
	if out.Extend != "" {
		out.Step = step
	}
	return out, nil
}
