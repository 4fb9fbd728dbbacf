// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package outbox

import (
	"context"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	testfixture "github.com/amphitheatre-app/timeout-controller/internal/testenv/fixture"
)

// TestAChannelIsNotTriedBeforeItsBackoffEnds: when one channel of an
// entry is due, the others that failed are left until their own next
// attempt.
func TestAChannelIsNotTriedBeforeItsBackoffEnds(t *testing.T) {
	f := newFixture(t)
	e := one("u1", "email", "webhook/x")
	e.Messages[0].Channels["webhook/x"] = &Delivery{Attempts: 3, NextAttempt: t0.Add(time.Hour)}
	f.prepare(e)
	f.o.Confirm("u1")
	f.pass()
	if n := f.deliver.count("email"); n != 1 {
		t.Errorf("email tried %d times, want once", n)
	}
	if n := f.deliver.count("webhook/x"); n != 0 {
		t.Errorf("the webhook, backing off for an hour, was tried %d times", n)
	}
}

// TestAFailedRecordOfDigestAttemptsIsLogged: after a digest's channels
// refused it, its attempts are written back; an error doing so is
// logged, unless the digest is gone meanwhile, and nothing is logged
// when the write succeeds.
func TestAFailedRecordOfDigestAttemptsIsLogged(t *testing.T) {
	notFound := apierrors.NewNotFound(schema.GroupResource{Resource: "configmaps"}, "digest")
	for _, tt := range []struct {
		name   string
		err    error
		logged bool
	}{
		{"logs nothing when the attempts are written", nil, false},
		{"logs nothing when the digest is gone", notFound, false},
		{"logs an error of the API server", errAPI, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f, _ := digestFixture(t, member("pb-1", t0))
			f.deliver.always = map[string]error{"email": errors.New("421 try later")}
			f.addDigest(t, newDigest([]Member{member("pb-1", t0)}, "email"))
			var lines testfixture.Logs
			f.o.Log = lines.Logger(0)
			updates := 0
			c := f.intercepted(interceptor.Funcs{Update: func(ctx context.Context, cl client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
				// The first closes the digest; the second records the
				// attempts.
				if updates++; updates == 2 && tt.err != nil {
					return tt.err
				}
				return cl.Update(ctx, obj, opts...)
			}})
			f.o.Store = &Store{Client: c, Reader: c, Namespace: namespace}
			f.pass()
			if updates < 2 {
				t.Fatalf("%d updates, want the digest closed and its attempts recorded", updates)
			}
			if got := len(lines.With("record digest attempts")); (got > 0) != tt.logged {
				t.Errorf("%d lines about recording the attempts, want logged %t", got, tt.logged)
			}
		})
	}
}

// TestAnEntryThatCannotBeReadIsReplaced: an entry about the same object
// that does not decode is written over, not taken for one that says the
// object is deleted.
func TestAnEntryThatCannotBeReadIsReplaced(t *testing.T) {
	f := newFixture(t)
	broken := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: Name("u1"), Labels: map[string]string{LabelManagedBy: ManagedBy, LabelEntry: "true"}},
		Data:       map[string]string{dataKey: "{"},
	}
	if err := f.client.Create(context.Background(), broken); err != nil {
		t.Fatal(err)
	}
	f.prepare(entry("u1", "email"))
	if e := f.stored("u1"); e == nil || e.State != PendingDelete {
		t.Errorf("stored %+v, want the new entry, pending its delete", e)
	}
}

// TestCancelLeavesAnEntryBeingSentToItsSender: the goroutine that holds
// an entry decides what becomes of it. Here Cancel cannot remove the
// entry, nor the sender read the object: the entry stays tracked, to be
// dropped at a later pass, not forgotten while it is still stored.
func TestCancelLeavesAnEntryBeingSentToItsSender(t *testing.T) {
	f := newFixture(t, governed("u1"))
	f.prepare(one("u1", "email"))
	f.clock.SetTime(t0.Add(pendingGrace))
	entered, release := make(chan struct{}), make(chan struct{})
	f.o.Objects = f.intercepted(interceptor.Funcs{Get: func(context.Context, client.WithWatch, client.ObjectKey, client.Object, ...client.GetOption) error {
		close(entered)
		<-release
		return errAPI
	}})
	c := f.intercepted(interceptor.Funcs{Delete: func(context.Context, client.WithWatch, client.Object, ...client.DeleteOption) error {
		return errAPI
	}})
	f.o.Store = &Store{Client: c, Reader: c, Namespace: namespace}
	f.o.Pass(context.Background())
	<-entered
	f.o.Cancel(context.Background(), "u1")
	close(release)
	f.o.Wait()
	if f.tracked() != 1 {
		t.Errorf("%d entries tracked, want the one still stored", f.tracked())
	}
}
