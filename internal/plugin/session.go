// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package plugin

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/decide"
	"github.com/amphitheatre-app/timeout-controller/internal/match"
)

// policiesGVR is the resource of TimeoutPolicies.
var policiesGVR = v1alpha1.GroupVersion.WithResource("timeoutpolicies")

// session holds the clients and what one command has read so far.
type session struct {
	o         *Options
	dyn       dynamic.Interface
	mapper    meta.RESTMapper
	namespace string
	// explicitNamespace is set when --namespace was given.
	explicitNamespace bool
	allNamespaces     bool

	policies []v1alpha1.TimeoutPolicy
	nsLabels map[string]map[string]string
}

func newSession(o *Options, allNamespaces bool) (*session, error) {
	cfg, err := o.ConfigFlags.ToRESTConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	mapper, err := o.ConfigFlags.ToRESTMapper()
	if err != nil {
		return nil, err
	}
	ns, explicit, err := o.ConfigFlags.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	return &session{o: o, dyn: dyn, mapper: mapper, namespace: ns, explicitNamespace: explicit, allNamespaces: allNamespaces,
		nsLabels: map[string]map[string]string{}}, nil
}

// loadPolicies reads every TimeoutPolicy.
func (s *session) loadPolicies(ctx context.Context) error {
	list, err := s.dyn.Resource(policiesGVR).List(ctx, metav1.ListOptions{})
	if err != nil {
		if apierrors.IsNotFound(err) {
			return withCode(ExitError, "the API server does not serve TimeoutPolicies (%s): is the timeout-controller's CRD installed?", policiesGVR.GroupResource())
		}
		return fmt.Errorf("list TimeoutPolicies: %w", err)
	}
	s.policies = make([]v1alpha1.TimeoutPolicy, 0, len(list.Items))
	for i := range list.Items {
		var p v1alpha1.TimeoutPolicy
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(list.Items[i].Object, &p); err != nil {
			return fmt.Errorf("read TimeoutPolicy %s: %w", list.Items[i].GetName(), err)
		}
		s.policies = append(s.policies, p)
	}
	return nil
}

// kind is a kind some policy targets, as the API server serves it.
type kind struct {
	gvk      schema.GroupVersionKind
	resource schema.GroupVersionResource
	// namespaced is set for namespaced kinds.
	namespaced bool
}

func (k kind) String() string {
	return strings.ToLower(k.gvk.Kind)
}

// targetKinds returns the kinds the policies target, resolved through
// discovery, in a stable order. A target the API server does not serve is
// left out: nothing of it exists to be governed. With filter set (a kind,
// a resource or a short name, as kubectl takes them), only that kind.
func (s *session) targetKinds(filter string) ([]kind, error) {
	var want *schema.GroupKind
	if filter != "" {
		gk, err := s.resolveKind(filter)
		if err != nil {
			return nil, err
		}
		want = &gk
	}
	seen := map[schema.GroupKind]bool{}
	var out []kind
	for i := range s.policies {
		gvk := match.TargetGVK(&s.policies[i])
		gk := gvk.GroupKind()
		if seen[gk] || (want != nil && *want != gk) {
			continue
		}
		seen[gk] = true
		m, err := s.mapper.RESTMapping(gk, gvk.Version)
		if err != nil {
			if meta.IsNoMatchError(err) {
				continue
			}
			return nil, fmt.Errorf("resolve %s: %w", gvk, err)
		}
		out = append(out, kind{gvk: m.GroupVersionKind, resource: m.Resource, namespaced: m.Scope.Name() == meta.RESTScopeNameNamespace})
	}
	if want != nil && len(out) == 0 {
		return nil, withCode(ExitNotGoverned, "no TimeoutPolicy targets %s: none of its objects is governed", want)
	}
	slices.SortFunc(out, func(a, b kind) int { return strings.Compare(a.gvk.GroupKind().String(), b.gvk.GroupKind().String()) })
	return out, nil
}

// resolveKind reads a kind as kubectl does: "playbooks", "playbook",
// "Playbook", "playbooks.amphitheatre.app" or a short name.
func (s *session) resolveKind(arg string) (schema.GroupKind, error) {
	gvr, err := s.mapper.ResourceFor(schema.ParseGroupResource(arg).WithVersion(""))
	if err != nil {
		return schema.GroupKind{}, usageError("unknown kind %q: the API server serves no such resource", arg)
	}
	gvk, err := s.mapper.KindFor(gvr)
	if err != nil {
		return schema.GroupKind{}, usageError("unknown kind %q: %v", arg, err)
	}
	return gvk.GroupKind(), nil
}

// listNamespace is the namespace to list a kind in: none for
// cluster-scoped kinds and with --all-namespaces.
func (s *session) listNamespace(k kind) string {
	if !k.namespaced || s.allNamespaces {
		return ""
	}
	return s.namespace
}

// list returns the objects of kind k that selector selects.
func (s *session) list(ctx context.Context, k kind, selector string) ([]unstructured.Unstructured, error) {
	list, err := s.dyn.Resource(k.resource).Namespace(s.listNamespace(k)).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", k.resource.GroupResource(), err)
	}
	return list.Items, nil
}

// namespaceLabels returns the labels of a namespace, read once per session.
func (s *session) namespaceLabels(ctx context.Context, name string) (map[string]string, error) {
	if l, ok := s.nsLabels[name]; ok {
		return l, nil
	}
	ns, err := s.dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("read the labels of namespace %s (a policy's namespaceSelector needs them): %w", name, err)
	}
	s.nsLabels[name] = ns.GetLabels()
	return ns.GetLabels(), nil
}

// evaluate works out what the policies make of obj now.
func (s *session) evaluate(ctx context.Context, k kind, obj *unstructured.Unstructured) (*Evaluation, error) {
	return Evaluate(obj, k.gvk, k.namespaced, s.policies, func() (map[string]string, error) {
		return s.namespaceLabels(ctx, obj.GetNamespace())
	}, s.o.Clock.Now())
}

// ref is an object named on the command line: [KIND/]NAME.
type ref struct {
	kind string
	name string
}

func parseRef(arg string) (ref, error) {
	kind, name, ok := strings.Cut(arg, "/")
	if !ok {
		return ref{name: arg}, nil
	}
	if kind == "" || name == "" || strings.Contains(name, "/") {
		return ref{}, usageError("%q is not NAME or KIND/NAME", arg)
	}
	return ref{kind: kind, name: name}, nil
}

// found is an object with its kind.
type found struct {
	kind kind
	obj  *unstructured.Unstructured
}

func (f found) String() string {
	s := f.kind.String() + "/" + f.obj.GetName()
	if f.obj.GetNamespace() != "" {
		s += " in namespace " + f.obj.GetNamespace()
	}
	return s
}

// find looks up the object r names among the kinds the policies target.
// KIND/NAME names an object by its name alone. A bare NAME is matched
// against names and, for kinds with titles, against Playbook titles alike:
// people know Playbooks by their titles, so a title is as much a name as
// the UUID, and neither may win silently over the other. It fails with
// ExitNotFound, ExitAmbiguous (more than one object matches) or
// ExitNotGoverned (when the kind is named and no policy targets it).
func (s *session) find(ctx context.Context, r ref) (found, error) {
	kinds, err := s.targetKinds(r.kind)
	if err != nil {
		return found{}, err
	}
	var matches []found
	var errs []error
	for _, k := range kinds {
		if !k.namespaced || !s.allNamespaces {
			obj, err := s.dyn.Resource(k.resource).Namespace(s.listNamespace(k)).Get(ctx, r.name, metav1.GetOptions{})
			switch {
			case apierrors.IsNotFound(err):
			case err != nil:
				errs = append(errs, err)
			default:
				matches = append(matches, found{k, obj})
			}
			continue
		}
		// A namespaced kind across namespaces is looked up by listing.
		list, err := s.dyn.Resource(k.resource).List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + r.name})
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for i := range list.Items {
			matches = append(matches, found{k, &list.Items[i]})
		}
	}
	for _, k := range kinds {
		if r.kind != "" || !decide.HasTitle(k.gvk.GroupKind()) {
			continue
		}
		items, err := s.list(ctx, k, "")
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for i := range items {
			// An object whose title is its name is one match, not two.
			if title(&items[i]) == r.name && items[i].GetName() != r.name {
				matches = append(matches, found{k, &items[i]})
			}
		}
	}
	if len(matches) == 1 {
		return matches[0], nil
	}
	if len(matches) > 1 {
		return found{}, ambiguous(r.name, matches)
	}
	if err := errors.Join(errs...); err != nil {
		return found{}, err
	}
	where := ""
	if !s.allNamespaces && slices.ContainsFunc(kinds, func(k kind) bool { return k.namespaced }) {
		where = fmt.Sprintf(" (namespaced kinds looked up in namespace %s; -A looks in all)", s.namespace)
	}
	what := "object"
	if r.kind != "" {
		what = r.kind
	}
	if len(kinds) == 0 {
		return found{}, withCode(ExitNotFound, "no %s called %q: no TimeoutPolicy targets a kind the API server serves", what, r.name)
	}
	names := make([]string, 0, len(kinds))
	for _, k := range kinds {
		names = append(names, k.resource.GroupResource().String())
	}
	return found{}, withCode(ExitNotFound, "no %s called %q among the kinds TimeoutPolicies target (%s)%s", what, r.name, strings.Join(names, ", "), where)
}

func ambiguous(name string, fs []found) error {
	var b strings.Builder
	for _, f := range fs {
		b.WriteString("\n  " + f.String())
		if t := title(f.obj); t != "" && t != f.obj.GetName() {
			fmt.Fprintf(&b, " (title %q)", t)
		}
	}
	return withCode(ExitAmbiguous, "%q names %d objects; say which with KIND/NAME (which matches names only) or -n NAMESPACE:%s", name, len(fs), b.String())
}

// fresh reads f's object again from the API server.
func (s *session) fresh(ctx context.Context, f found) (*unstructured.Unstructured, error) {
	return s.dyn.Resource(f.kind.resource).Namespace(f.obj.GetNamespace()).Get(ctx, f.obj.GetName(), metav1.GetOptions{})
}
