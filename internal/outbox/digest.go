// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

// Owners' digests: one reminder stage about several objects of one owner,
// kept as an entry (a ConfigMap) from before it is sent until every
// member's record shows it, so that a crash or a change of leader neither
// loses it nor sends it twice.
//
// An entry goes open -> sending -> sent -> removed. Open, it takes more
// members. Sending, its members are fixed: it is sent until a channel
// accepts it, with a Message-ID derived from its name, so that a retry
// after an acceptance the entry does not show yet (the one window every
// message has) is recognisably the same mail. Sent, the members' records
// are written; records are written only from a sent entry, so that an
// object is never marked as told when the mail did not go out.

package outbox

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/notify"
)

// LabelDigest marks the entries that are owners' digests.
const LabelDigest = "timeout.amphitheatre.app/digest"

// digestPrefix starts every digest's name; a hash of its policy, owner,
// stage and start ends it.
const digestPrefix = "timeout-digest-"

// The states of a digest.
const (
	// DigestOpen: nothing is sent yet, and it takes more members.
	DigestOpen State = "open"
	// DigestSending: its members are fixed; it goes out until a channel
	// accepts it.
	DigestSending State = "sending"
	// DigestSent: a channel accepted it; its members' records are written.
	DigestSent State = "sent"
)

// ErrDigestClosed is what JoinDigest says of a digest that no longer
// takes members: the object needs another.
var ErrDigestClosed = errors.New("the digest no longer takes members")

// MaxWindow caps how long before its stage falls due an object may be
// told in a digest.
const MaxWindow = time.Hour

// Window is how far ahead of its start a digest of the reminder with the
// given lead takes members: a quarter of the lead, an hour at most. Every
// member is told no later than its own reminder would have been, and at
// most that much earlier.
func Window(lead time.Duration) time.Duration {
	return min(MaxWindow, lead/4)
}

// Member is one object of a digest.
type Member struct {
	Object notify.Object `json:"object"`
	// ExpiresAt is the expiry it is told about: its record is written
	// only while its expiry is still this one.
	ExpiresAt time.Time `json:"expiresAt"`
	// Due is when its own reminder of the stage falls due.
	Due    time.Time `json:"due"`
	Extend string    `json:"extend,omitempty"`
	// Dropped: when the digest was closed the object was gone or had
	// another expiry; the digest does not name it and its record is not
	// written.
	Dropped bool `json:"dropped,omitempty"`
	// Recorded: its record shows the digest, or needs not (gone since).
	Recorded bool `json:"recorded,omitempty"`
}

// Digest is the reminder stage Stage of policy Policy about several
// objects of the owner whose address is Owner.
type Digest struct {
	State   State     `json:"state"`
	Created time.Time `json:"created"`
	Policy  string    `json:"policy"`
	Owner   string    `json:"owner"`
	// OwnerName is the owner as the members' owner annotation names them,
	// whose page the digest's links open; empty in a digest written
	// before it was kept.
	OwnerName string `json:"ownerName,omitempty"`
	Stage     string `json:"stage"`
	// Start is when the first member's stage fell due.
	Start   time.Time `json:"start"`
	Members []Member  `json:"members"`
	// Channels are the policy's e-mail channels that may carry it, and
	// where it stands on each; it goes out over the first that accepts.
	Channels map[string]*Delivery `json:"channels"`
	// SentAt is when a channel accepted it: the members' notice.
	SentAt time.Time `json:"sentAt,omitzero"`

	name            string
	resourceVersion string
}

// DigestName returns the name of the digest of policy, owner and stage
// that starts at start.
func DigestName(policy, owner, stage string, start time.Time) string {
	sum := sha256.Sum256(fmt.Appendf(nil, "%s\x00%s\x00%s\x00%s", policy, owner, stage, start.UTC().Format(time.RFC3339Nano)))
	return digestPrefix + hex.EncodeToString(sum[:16])
}

// Name is the digest's ConfigMap name.
func (d *Digest) Name() string {
	if d.name == "" {
		d.name = DigestName(d.Policy, d.Owner, d.Stage, d.Start)
	}
	return d.name
}

// Batch picks out of candidates the members of a digest of the reminder
// with the given lead that starts at start: those whose stage falls due
// within its window, earliest first. The candidates are the owner's
// objects under the policy whose reminder of that stage has not reached
// the owner.
func Batch(candidates []Member, lead time.Duration, start time.Time) []Member {
	end := start.Add(Window(lead))
	var out []Member
	for _, m := range candidates {
		if !m.Due.Before(start) && !m.Due.After(end) {
			out = append(out, m)
		}
	}
	slices.SortFunc(out, func(a, b Member) int {
		return cmp.Or(a.Due.Compare(b.Due), cmp.Compare(a.Object.Namespace, b.Object.Namespace), cmp.Compare(a.Object.Name, b.Object.Name))
	})
	return out
}

// Covers reports whether the open digest d can take an object whose
// stage falls due at due, with the given lead.
func (d *Digest) Covers(lead time.Duration, due time.Time) bool {
	return d.State == DigestOpen && !due.Before(d.Start) && !due.After(d.Start.Add(Window(lead)))
}

// Lists reports whether d tells the object uid about the expiry
// expiresAt, or will: while it does, the object's own reconcile leaves
// its owner to the digest.
func (d *Digest) Lists(uid types.UID, expiresAt time.Time) bool {
	return slices.ContainsFunc(d.Members, func(m Member) bool {
		return m.Object.UID == uid && m.ExpiresAt.Equal(expiresAt) && !m.Dropped
	})
}

// message is the mail d is: to the owner alone, about its members still
// there, with an ID that is the same at every attempt.
func (d *Digest) message(now time.Time) notify.Message {
	m := notify.Message{
		ID: d.Name()[len(digestPrefix):], Type: v1alpha1.EventReminder, Time: now, Stage: d.Stage, Policy: d.Policy,
		Recipients: notify.Recipients{Emails: []string{d.Owner}},
		Digest:     &notify.Digest{Stage: d.Stage, Owner: d.OwnerName},
	}
	for _, mem := range d.Members {
		if mem.Dropped {
			continue
		}
		if len(m.Digest.Items) == 0 || mem.ExpiresAt.Before(m.ExpiresAt) {
			m.Object, m.ExpiresAt = mem.Object, mem.ExpiresAt
		}
		m.Digest.Items = append(m.Digest.Items, notify.DigestItem{Object: mem.Object, ExpiresAt: mem.ExpiresAt, Extend: mem.Extend})
	}
	return m
}

func (s *Store) digestConfigMap(d *Digest) (*corev1.ConfigMap, error) {
	return s.encode("digest", d.Name(), d.resourceVersion, LabelDigest, d)
}

func decodeDigest(cm *corev1.ConfigMap) (*Digest, error) {
	d := &Digest{}
	if err := json.Unmarshal([]byte(cm.Data[dataKey]), d); err != nil {
		return nil, fmt.Errorf("decode digest %s/%s: %w", cm.Namespace, cm.Name, err)
	}
	d.name, d.resourceVersion = cm.Name, cm.ResourceVersion
	return d, nil
}

// CreateDigest writes a new digest, open. One of the same name already
// there is an AlreadyExists error: the caller joins it instead.
func (s *Store) CreateDigest(ctx context.Context, d *Digest) error {
	d.State = DigestOpen
	cm, err := s.digestConfigMap(d)
	if err != nil {
		return err
	}
	if err := s.Client.Create(ctx, cm); err != nil {
		return fmt.Errorf("create digest %s: %w", cm.Name, err)
	}
	d.resourceVersion = cm.ResourceVersion
	return nil
}

// GetDigest reads the digest name from the API server.
func (s *Store) GetDigest(ctx context.Context, name string) (*Digest, error) {
	cm := &corev1.ConfigMap{}
	if err := s.Reader.Get(ctx, types.NamespacedName{Namespace: s.Namespace, Name: name}, cm); err != nil {
		return nil, fmt.Errorf("read digest %s: %w", name, err)
	}
	return decodeDigest(cm)
}

// JoinDigest adds m to the digest name while it is open. The write is
// locked on the version read, so that it cannot slip past the sender's
// closing it: a conflict is returned as it is, to be tried again.
func (s *Store) JoinDigest(ctx context.Context, name string, m Member) (*Digest, error) {
	d, err := s.GetDigest(ctx, name)
	if err != nil {
		return nil, err
	}
	if d.Lists(m.Object.UID, m.ExpiresAt) {
		return d, nil
	}
	if d.State != DigestOpen {
		return nil, fmt.Errorf("join digest %s: %w", name, ErrDigestClosed)
	}
	d.Members = append(d.Members, m)
	return d, s.UpdateDigest(ctx, d)
}

// UpdateDigest writes d over the version it was read at.
func (s *Store) UpdateDigest(ctx context.Context, d *Digest) error {
	cm, err := s.digestConfigMap(d)
	if err != nil {
		return err
	}
	if err := s.Client.Update(ctx, cm); err != nil {
		return fmt.Errorf("update digest %s: %w", cm.Name, err)
	}
	d.resourceVersion = cm.ResourceVersion
	return nil
}

// RemoveDigest deletes d; one already gone is no error.
func (s *Store) RemoveDigest(ctx context.Context, d *Digest) error {
	return s.remove(ctx, "digest", d.Name())
}

// ListDigests returns every stored digest; one that cannot be read is
// skipped and reported in errs.
func (s *Store) ListDigests(ctx context.Context) (digests []*Digest, errs []error, err error) {
	return list(ctx, s, "digests", LabelDigest, decodeDigest)
}
