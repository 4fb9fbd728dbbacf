// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package plugin

import (
	"bytes"
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
)

var playbooksGVR = schema.GroupVersionResource{Group: "amphitheatre.app", Version: "v1", Resource: "playbooks"}

// fakeSession is a session over a fake API server that serves the
// policies and the Playbooks (cluster-scoped, as Amphitheatre's CRD has
// them), at now.
func fakeSession(t *testing.T, now time.Time, policies []v1alpha1.TimeoutPolicy, playbooks ...*unstructured.Unstructured) (*session, *bytes.Buffer) {
	t.Helper()
	var objs []runtime.Object
	for i := range policies {
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&policies[i])
		if err != nil {
			t.Fatal(err)
		}
		p := &unstructured.Unstructured{Object: u}
		p.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind("TimeoutPolicy"))
		objs = append(objs, p)
	}
	for _, pb := range playbooks {
		objs = append(objs, pb)
	}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{policiesGVR: "TimeoutPolicyList", playbooksGVR: "PlaybookList"}, objs...)
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(playbookGVK, meta.RESTScopeRoot)
	var out bytes.Buffer
	o := &Options{IOStreams: genericiooptions.IOStreams{Out: &out, ErrOut: &out}, Clock: clocktesting.NewFakePassiveClock(now)}
	return &session{o: o, dyn: dyn, mapper: mapper, namespace: "default", nsLabels: map[string]map[string]string{}}, &out
}

// renamed is obj under another name and title.
func renamed(obj *unstructured.Unstructured, name, title string) *unstructured.Unstructured {
	obj.SetName(name)
	_ = unstructured.SetNestedField(obj.Object, name, "spec", "id")
	_ = unstructured.SetNestedField(obj.Object, title, "spec", "title")
	return obj
}

// TestListShowsObjectsInTerminating: a Playbook whose deletion has begun
// and that Amphitheatre's finalizer still holds is listed as terminating,
// with since when and what holds it, so that a deletion that has not
// completed is seen.
func TestListShowsObjectsInTerminating(t *testing.T) {
	day := expiry.Day
	now := t0.Add(14*day + 2*time.Hour)
	policies := []v1alpha1.TimeoutPolicy{playbookPolicy("playbooks")}
	objects := func() []*unstructured.Unstructured {
		return []*unstructured.Unstructured{
			renamed(playbook(map[string]string{expiry.AnnotationTTL: "20d"}), "5c0d6a1f", "hello-go"),
			renamed(playbook(map[string]string{expiry.AnnotationKeep: "true"}), "9e4b2d70", "precious"),
			renamed(terminating(playbook(nil), t0.Add(14*day+time.Second)), "2b1e7c9e", "Weekend demo"),
		}
	}

	tests := []struct {
		name string
		lo   listOptions
		want string
	}{
		{
			name: "lists it first, terminating since its deletion began",
			lo:   listOptions{output: "table"},
			want: `NAME                TITLE          CREATED      EXPIRES (UTC)      LEFT         REMINDERS   POLICY      FLAGS
playbook/2b1e7c9e   Weekend demo   14d 2h ago   -                  1h 59m ago   -           playbooks   terminating
playbook/5c0d6a1f   hello-go       14d 2h ago   2026-03-21 09:00   5d 22h       -           playbooks   -
playbook/9e4b2d70   precious       14d 2h ago   -                  -            -           playbooks   keep
`,
		},
		{
			name: "keeps it under --expiring-within, which leaves out later deletions and kept objects",
			lo:   listOptions{output: "table", expiringWithin: "1d", within: day},
			want: `NAME                TITLE          CREATED      EXPIRES (UTC)   LEFT         REMINDERS   POLICY      FLAGS
playbook/2b1e7c9e   Weekend demo   14d 2h ago   -               1h 59m ago   -           playbooks   terminating
`,
		},
		{
			name: "shows when its deletion began and the finalizers that hold it in the wide table",
			lo:   listOptions{output: "wide"},
			want: `NAME                TITLE          CREATED                EXPIRES (UTC)          LEFT         REMINDERS   POLICY      FLAGS         SOURCE                         DELETE AT              NEXT                                           LAST ACTIVE   MAX
playbook/2b1e7c9e   Weekend demo   2026-03-01T09:00:00Z   -                      1h 59m ago   -           playbooks   terminating   -                              2026-03-15T09:00:01Z   held by playbooks.amphitheatre.app/finalizer   -             -
playbook/5c0d6a1f   hello-go       2026-03-01T09:00:00Z   2026-03-21T09:00:00Z   5d 22h       -           playbooks   -             timeout.amphitheatre.app/ttl   2026-03-21T09:00:00Z   3d reminder 2026-03-18T09:00:00Z               -             -
playbook/9e4b2d70   precious       2026-03-01T09:00:00Z   -                      -            -           playbooks   keep          -                              -                      -                                              -             -
`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, out := fakeSession(t, now, policies, objects()...)
			evs, err := s.governed(context.Background(), tt.lo, "")
			if err != nil {
				t.Fatal(err)
			}
			if err := writeList(s.o, tt.lo.output, evs); err != nil {
				t.Fatal(err)
			}
			if out.String() != tt.want {
				t.Errorf("list says\n%s\nwant\n%s", out.String(), tt.want)
			}
		})
	}

	t.Run("gives since when and its finalizers, and no lifetime, in JSON", func(t *testing.T) {
		s, out := fakeSession(t, now, policies, objects()...)
		evs, err := s.governed(context.Background(), listOptions{output: "json"}, "")
		if err != nil {
			t.Fatal(err)
		}
		if err := writeList(s.o, "json", evs); err != nil {
			t.Fatal(err)
		}
		var list ItemList
		if err := json.Unmarshal(out.Bytes(), &list); err != nil {
			t.Fatal(err)
		}
		if len(list.Items) != 3 || list.Items[0].Name != "2b1e7c9e" {
			t.Fatalf("items %+v, want the Playbook in Terminating first of 3", list.Items)
		}
		it := list.Items[0]
		if it.Deletion == nil || !time.Time(it.Deletion.Since).Equal(t0.Add(14*day+time.Second)) ||
			!reflect.DeepEqual(it.Deletion.Finalizers, []string{amphitheatreFinalizer}) {
			t.Errorf("deletion %+v, want since %s, held by %s", it.Deletion, t0.Add(14*day+time.Second), amphitheatreFinalizer)
		}
		if it.ExpiresAt != nil || it.DeleteAt != nil || it.SecondsLeft != nil || it.Source != "" {
			t.Errorf("an object in Terminating has a lifetime: %+v", it)
		}
		if !reflect.DeepEqual(it.Flags, []string{"terminating"}) {
			t.Errorf("flags %v, want [terminating]", it.Flags)
		}
		if !strings.Contains(out.String(), `"deletion": {`) {
			t.Errorf("no deletion in\n%s", out.String())
		}
	})
}
