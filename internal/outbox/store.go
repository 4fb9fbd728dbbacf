// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

// Package outbox keeps the messages that go out once an object is gone
// (expired, deleted) in the API, one ConfigMap per deleted object in the
// controller's namespace, and sends them until every channel accepted
// them or the bound runs out. An entry is written before the delete, so a
// crash, a restart or a change of leader loses none of them.
package outbox

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/amphitheatre-app/timeout-controller/internal/notify"
)

// Labels of every entry: the second one is what the sender lists by.
const (
	LabelManagedBy = "app.kubernetes.io/managed-by"
	ManagedBy      = "timeout-controller"
	LabelEntry     = "timeout.amphitheatre.app/outbox"
)

// dataKey holds an entry's JSON in its ConfigMap.
const dataKey = "entry.json"

// namePrefix starts every entry's name; the deleted object's UID ends it.
const namePrefix = "timeout-outbox-"

// State says whether an entry's object is known to be deleted.
type State string

const (
	// PendingDelete: written before the delete, which may not have
	// happened (the process stopped in between, or the delete lost a race).
	PendingDelete State = "pending-delete"
	// Deleted: the delete succeeded; the messages are due.
	Deleted State = "deleted"
)

// Entry is the one-off messages about one deleted object that some
// channel has not accepted yet. It holds no secret: channels are found
// again by name in the policy at each attempt.
type Entry struct {
	State   State     `json:"state"`
	Created time.Time `json:"created"`
	// APIVersion and Kind of the object, for the check of an entry left
	// pending-delete.
	Object notify.Object `json:"object"`
	Policy string        `json:"policy"`
	// About tells apart the entries about one object that is not gone: a
	// deletion that failed ("deletion-failed") is told while the object
	// stays. Empty for the messages about a deletion.
	About    string    `json:"about,omitempty"`
	Messages []Message `json:"messages"`

	name            string
	resourceVersion string
}

// Message is one message and where it stands on each channel that
// carries it.
type Message struct {
	Message  notify.Message       `json:"message"`
	Channels map[string]*Delivery `json:"channels"`
}

// Delivery is where a message stands on one channel.
type Delivery struct {
	Accepted    bool      `json:"accepted,omitempty"`
	Attempts    int       `json:"attempts,omitempty"`
	NextAttempt time.Time `json:"nextAttempt,omitzero"`
	// LastError is the channel's last refusal; channels keep secrets out
	// of their errors.
	LastError string `json:"lastError,omitempty"`
}

// Name returns the name of the entry about the object with uid: the same
// for every attempt to delete it, so that writing it again is harmless.
func Name(uid types.UID) string {
	return namePrefix + string(uid)
}

// Name is the entry's ConfigMap name.
func (e *Entry) Name() string {
	if e.name == "" {
		e.name = Name(e.Object.UID)
		if e.About != "" {
			e.name += "-" + e.About
		}
	}
	return e.name
}

// done reports whether every channel accepted every message.
func (e *Entry) done() bool {
	for _, m := range e.Messages {
		for _, d := range m.Channels {
			if !d.Accepted {
				return false
			}
		}
	}
	return true
}

// Store reads and writes entries in one namespace.
type Store struct {
	// Client writes entries.
	Client client.Client
	// Reader lists them from the API server: the controller keeps no
	// cache of ConfigMaps.
	Reader    client.Reader
	Namespace string
}

func (s *Store) configMap(e *Entry) (*corev1.ConfigMap, error) {
	return s.encode("outbox entry", e.Name(), e.resourceVersion, LabelEntry, e)
}

// encode returns the ConfigMap that stores v, an entry or a digest
// (what), under name with the label that lists its kind.
func (s *Store) encode(what, name, resourceVersion, label string, v any) (*corev1.ConfigMap, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode %s %s: %w", what, name, err)
	}
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:       s.Namespace,
			Name:            name,
			ResourceVersion: resourceVersion,
			Labels:          map[string]string{LabelManagedBy: ManagedBy, label: "true"},
		},
		Data: map[string]string{dataKey: string(data)},
	}, nil
}

func decode(cm *corev1.ConfigMap) (*Entry, error) {
	e := &Entry{}
	if err := json.Unmarshal([]byte(cm.Data[dataKey]), e); err != nil {
		return nil, fmt.Errorf("decode outbox entry %s/%s: %w", cm.Namespace, cm.Name, err)
	}
	e.name, e.resourceVersion = cm.Name, cm.ResourceVersion
	return e, nil
}

// Create writes e. An entry already there about the same object (a delete
// tried again) is replaced, unless it says the object is deleted: then it
// is returned as it is.
func (s *Store) Create(ctx context.Context, e *Entry) (*Entry, error) {
	cm, err := s.configMap(e)
	if err != nil {
		return nil, err
	}
	err = s.Client.Create(ctx, cm)
	if apierrors.IsAlreadyExists(err) {
		old := &corev1.ConfigMap{}
		if err := s.Reader.Get(ctx, client.ObjectKeyFromObject(cm), old); err != nil {
			return nil, fmt.Errorf("read outbox entry %s: %w", cm.Name, err)
		}
		prev, err := decode(old)
		if err == nil && prev.State == Deleted {
			return prev, nil
		}
		cm.ResourceVersion = old.ResourceVersion
		err = s.Client.Update(ctx, cm)
		if err != nil {
			return nil, fmt.Errorf("replace outbox entry %s: %w", cm.Name, err)
		}
	} else if err != nil {
		return nil, fmt.Errorf("create outbox entry %s: %w", cm.Name, err)
	}
	e.resourceVersion = cm.ResourceVersion
	return e, nil
}

// Update writes e over what is stored.
func (s *Store) Update(ctx context.Context, e *Entry) error {
	cm, err := s.configMap(e)
	if err != nil {
		return err
	}
	// Only the leader writes entries once they are handed over, so the
	// version it last wrote is the one stored.
	if err := s.Client.Update(ctx, cm); err != nil {
		return fmt.Errorf("update outbox entry %s: %w", cm.Name, err)
	}
	e.resourceVersion = cm.ResourceVersion
	return nil
}

// Remove deletes e; one already gone is no error.
func (s *Store) Remove(ctx context.Context, e *Entry) error {
	return s.remove(ctx, "outbox entry", e.Name())
}

func (s *Store) remove(ctx context.Context, what, name string) error {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: name}}
	if err := s.Client.Delete(ctx, cm); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("remove %s %s: %w", what, name, err)
	}
	return nil
}

// List returns every stored entry. One that cannot be read is skipped and
// reported in errs, so that it cannot hold up the others.
func (s *Store) List(ctx context.Context) (entries []*Entry, errs []error, err error) {
	return list(ctx, s, "outbox entries", LabelEntry, decode)
}

// list returns the stored things (what) with label, decoded; one that
// cannot be decoded is skipped and reported in errs.
func list[T any](ctx context.Context, s *Store, what, label string, decode func(*corev1.ConfigMap) (T, error)) (out []T, errs []error, err error) {
	var cms corev1.ConfigMapList
	if err := s.Reader.List(ctx, &cms, client.InNamespace(s.Namespace), client.MatchingLabels{label: "true"}); err != nil {
		return nil, nil, fmt.Errorf("list %s in %s: %w", what, s.Namespace, err)
	}
	for i := range cms.Items {
		v, err := decode(&cms.Items[i])
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, v)
	}
	return out, errs, nil
}
