// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package delivery

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/amphitheatre-app/timeout-controller/internal/controller/kube"
	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
	"github.com/amphitheatre-app/timeout-controller/internal/notify"
	"github.com/amphitheatre-app/timeout-controller/internal/outbox"
	"github.com/amphitheatre-app/timeout-controller/internal/testenv/fixture"
	"github.com/amphitheatre-app/timeout-controller/internal/wakeup"
)

func TestDigestMarker(t *testing.T) {
	expires := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	sent := expires.Add(-72 * time.Hour)
	emailed := sent.Add(-time.Minute)
	digest := &outbox.Digest{Policy: "playbooks", Owner: "alice@example.com", Stage: "3d"}
	member := outbox.Member{Object: notify.Object{APIVersion: "amphitheatre.app/v1", Kind: "Playbook", Namespace: "apps", Name: "pb", UID: "uid-pb"}, ExpiresAt: expires}
	for _, tc := range []struct {
		name string
		// record is the object's record; nil: no object.
		record    *expiry.Record
		uid       types.UID
		conflicts int
		// bare: the object is there with no record yet; lifetime, when
		// set, is the expiry its policy and annotations give it now.
		bare     bool
		lifetime time.Time
		// wantCurrent says the digest may name it; wantNotice is its
		// NoticeAt after Mark, zero when Mark must leave it alone.
		wantCurrent bool
		wantNotice  time.Time
	}{
		{name: "marks a member owed the stage", record: &expiry.Record{ExpiresAt: expires}, uid: "uid-pb", wantCurrent: true, wantNotice: sent},
		{name: "keeps the notice an earlier channel gave", uid: "uid-pb", wantCurrent: true, wantNotice: emailed,
			record: &expiry.Record{ExpiresAt: expires, NoticeAt: emailed, Sent: map[string]expiry.Delivery{"3d": {At: emailed, Channels: []string{"email"}}}}},
		{name: "marks through conflicts", record: &expiry.Record{ExpiresAt: expires}, uid: "uid-pb", conflicts: 2, wantCurrent: true, wantNotice: sent},
		{name: "leaves a member extended since", record: &expiry.Record{ExpiresAt: expires.Add(time.Hour)}, uid: "uid-pb"},
		{name: "leaves another object of the same name", record: &expiry.Record{ExpiresAt: expires}, uid: "uid-other"},
		{name: "leaves a member deleted"},
		{name: "starts the record of a member told nothing yet", bare: true, uid: "uid-pb", wantCurrent: true, wantNotice: sent},
		{name: "leaves a member whose annotations extended it, record or not", bare: true, uid: "uid-pb", lifetime: expires.Add(time.Hour)},
		{name: "marks a member whose lifetime is the one named", record: &expiry.Record{ExpiresAt: expires}, uid: "uid-pb", lifetime: expires,
			wantCurrent: true, wantNotice: sent},
		{name: "leaves a member already marked", uid: "uid-pb",
			record: &expiry.Record{ExpiresAt: expires, NoticeAt: emailed, Sent: map[string]expiry.Delivery{"3d": {At: emailed, Channels: []string{OwnerChannel}}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gvk := schema.GroupVersionKind{Group: "amphitheatre.app", Version: "v1", Kind: "Playbook"}
			mapper := meta.NewDefaultRESTMapper(nil)
			mapper.Add(gvk, meta.RESTScopeNamespace)
			b := fake.NewClientBuilder().WithScheme(fixture.Scheme(t)).WithRESTMapper(mapper)
			if tc.record != nil || tc.bare {
				pb := &unstructured.Unstructured{}
				pb.SetGroupVersionKind(gvk)
				pb.SetNamespace("apps")
				pb.SetName("pb")
				pb.SetUID(tc.uid)
				if tc.record != nil {
					pb.SetAnnotations(map[string]string{expiry.AnnotationReminders: tc.record.String()})
				}
				b = b.WithObjects(pb)
			}
			api := b.Build()
			conflicts := tc.conflicts
			c := interceptor.NewClient(api, interceptor.Funcs{Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
				if conflicts > 0 {
					conflicts--
					// Someone else wrote the object meanwhile.
					return apierrors.NewConflict(schema.GroupResource{Group: gvk.Group, Resource: "playbooks"}, "pb", errors.New("the object has been modified"))
				}
				return c.Patch(ctx, obj, patch, opts...)
			}})
			dm := DigestMarker{Client: c, Reader: c}
			if !tc.lifetime.IsZero() {
				dm.Expiry = func(context.Context, wakeup.Key, *metav1.PartialObjectMetadata) (time.Time, bool) {
					return tc.lifetime, true
				}
			}
			current, err := dm.Current(t.Context(), digest, member)
			if err != nil || current != tc.wantCurrent {
				t.Errorf("Current = %v, %v; want %v", current, err, tc.wantCurrent)
			}
			if err := dm.Mark(t.Context(), digest, member, sent); err != nil {
				t.Fatal(err)
			}
			if err := dm.Mark(t.Context(), digest, member, sent.Add(time.Minute)); err != nil {
				t.Fatal(err)
			}
			if tc.record == nil && !tc.bare {
				return
			}
			obj := kube.NewMetadata(gvk)
			if err := api.Get(t.Context(), types.NamespacedName{Namespace: "apps", Name: "pb"}, obj); err != nil {
				t.Fatal(err)
			}
			rec, err := expiry.ParseRecord(obj.Annotations[expiry.AnnotationReminders])
			if err != nil {
				t.Fatal(err)
			}
			if rec == nil {
				if !tc.wantNotice.IsZero() {
					t.Fatal("no record written")
				}
				return
			}
			marked := slices.Contains(rec.Sent["3d"].Channels, OwnerChannel)
			if tc.wantNotice.IsZero() {
				if rec.String() != tc.record.String() {
					t.Errorf("record = %s, want it untouched", rec)
				}
				return
			}
			if !marked || !rec.NoticeAt.Equal(tc.wantNotice) || !rec.Announced.Equal(expires) {
				t.Errorf("record = %s; want the 3d stage delivered over %s, notice at %s and the expiry announced", rec, OwnerChannel, tc.wantNotice)
			}
			if current, _ := dm.Current(t.Context(), digest, member); current {
				t.Error("a member marked is still owed the stage")
			}
		})
	}
}
