// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package delivery

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/controller/channelset"
	"github.com/amphitheatre-app/timeout-controller/internal/controller/eval"
	"github.com/amphitheatre-app/timeout-controller/internal/notify"
	"github.com/amphitheatre-app/timeout-controller/internal/outbox"
)

// farewells are the messages about an object that go out after it is
// deleted, through the outbox.
var farewells = []v1alpha1.EventType{v1alpha1.EventExpired, v1alpha1.EventDeleted}

// Farewell is the outbox entry holding the expired and deleted messages
// about obj, over the channels of its policy that carry them; nil when
// none does.
func (d *Deliverer) Farewell(ctx context.Context, ev *eval.Evaluation, reclaimed *notify.Reclaimed) *outbox.Entry {
	e := d.OutboxEntry(ctx, ev, farewells, "", "")
	if e != nil {
		for i := range e.Messages {
			if m := &e.Messages[i].Message; m.Type == v1alpha1.EventDeleted {
				m.Reclaimed = reclaimed
			}
		}
	}
	return e
}

// SaysFarewell reports whether a channel of ev's policy carries the
// expired or deleted message: whether its deletion has a farewell.
func SaysFarewell(ev *eval.Evaluation) bool {
	if ev.Channels == nil {
		return false
	}
	for _, n := range ev.Channels.Notifiers {
		for _, t := range farewells {
			if n.Accepts(t) {
				return true
			}
		}
	}
	return false
}

// OutboxEntry is the outbox entry holding the messages of types about
// obj, with detail, over the channels of its policy that carry them; nil
// when none does. about tells apart an entry that is not about a deletion.
func (d *Deliverer) OutboxEntry(ctx context.Context, ev *eval.Evaluation, messageTypes []v1alpha1.EventType, about, detail string) *outbox.Entry {
	e := &outbox.Entry{Created: d.Clock.Now(), Policy: ev.Policy.Name, About: about}
	for _, t := range messageTypes {
		channels := map[string]*outbox.Delivery{}
		for _, name := range slices.Sorted(maps.Keys(ev.Channels.Notifiers)) {
			if ev.Channels.Notifiers[name].Accepts(t) {
				channels[name] = &outbox.Delivery{}
			}
		}
		if len(channels) == 0 {
			continue
		}
		msg := d.message(ctx, ev, t, ev.Life.ExpiresAt, "")
		msg.Detail = detail
		e.Object = msg.Object
		e.Messages = append(e.Messages, outbox.Message{Message: msg, Channels: channels})
	}
	if len(e.Messages) == 0 {
		return nil
	}
	return e
}

// OutboxDeliverer sends the outbox's messages over the channels of their
// policy as it is now: a rotated Secret or a fixed URL is picked up.
type OutboxDeliverer struct {
	Reader   client.Reader
	Channels *channelset.Channels
	// Links signs the links of owners' digests; nil without --actions-url.
	Links *Links
}

func (d OutboxDeliverer) Deliver(ctx context.Context, policy string, msg notify.Message, names []string) (map[string]error, error) {
	p := &v1alpha1.TimeoutPolicy{}
	if err := d.Reader.Get(ctx, types.NamespacedName{Name: policy}, p); apierrors.IsNotFound(err) {
		p = orphaned(policy, names)
	} else if err != nil {
		return nil, fmt.Errorf("get policy %s: %w", policy, err)
	}
	set, err := d.Channels.Get(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("channels of policy %s: %w", policy, err)
	}
	results := map[string]error{}
	var carried []string
	for _, name := range names {
		if n, ok := set.Notifiers[name]; ok && n.Accepts(msg.Type) {
			carried = append(carried, name)
		} else {
			results[name] = outbox.ErrNotCarried
		}
	}
	if len(carried) == 0 {
		return results, nil
	}
	msg.Linker = d.Links.digestLinks(ctx, p, msg)
	// The outbox sends in the background: it waits for a busy channel.
	out := deliver(notify.WaitForSlot(ctx), set, carried, msg)
	for _, name := range out.sent {
		results[name] = nil
	}
	for name, text := range out.failed {
		results[name] = errors.New(text)
	}
	return results, nil
}

// orphaned stands in for a policy deleted after one of its objects was:
// the messages still go out over the channels it named, with the default
// templates and without the policy's own recipients. A channel that
// restricts its users with a policySelector refuses the stand-in, which
// has no labels.
func orphaned(policy string, channels []string) *v1alpha1.TimeoutPolicy {
	p := &v1alpha1.TimeoutPolicy{}
	p.Name = policy
	// Its own cache entry, apart from any live policy's.
	p.UID = types.UID("deleted/" + policy + "/" + strings.Join(channels, ","))
	for _, name := range channels {
		p.Spec.Notifications.Channels = append(p.Spec.Notifications.Channels, v1alpha1.ChannelReference{Name: name})
	}
	return p
}
