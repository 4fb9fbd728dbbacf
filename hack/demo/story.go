// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
)

// eventNamespace receives the Events of cluster-scoped objects such as
// Playbooks; the demo passes it to the controller and watches it.
const eventNamespace = metav1.NamespaceDefault

// The administrator's part, which every scene uses.
const (
	// The webhook receiver and the Secret with its signing key.
	webhookName     = "demo-receiver"
	mailChannel     = "demo-mail"
	secretNamespace = "timeout-system"
	secretName      = "demo-webhook"
	secretKey       = "key"
	// The policies' sender and recipient.
	mailFrom = "timeout-controller@demo.local"
	mailTo   = "platform@demo.local"
	// sceneLabel selects the Playbooks of a scene for the policy of that
	// scene, which outranks the first scene's (priority 10).
	sceneLabel = "demo.timeout.amphitheatre.app/act"
	// lateAfter is how far past its expiry (or postponed deletion time) a
	// deletion, a sleep or a message still counts as on time; the
	// controller normally acts within milliseconds.
	lateAfter = 5 * time.Second
	// eventGrace bounds the wait for the last Expired and Deleted Events and
	// messages, which are sent just after the deletions they report.
	eventGrace = 5 * time.Second
)

var playbookGVK = schema.GroupVersionKind{Group: "amphitheatre.app", Version: "v1", Kind: "Playbook"}

// scene is one part of the product's story. The story tells the scenes
// in this order; a scene played alongside starts at the first scene's
// cue and runs beside the scenes before it, and what it says waits for
// its turn, stamped with the times it happened.
type scene struct {
	title string
	play  func(s *story, ctx context.Context, set *set) error
	// alongside: started at the first scene's cue, told in its turn.
	alongside bool
	// during names the scene whose clock it plays on: it is told there.
	during int
}

// The numbers of the scenes whose Playbooks the results tell apart.
const (
	sceneSleep  = 3
	sceneDigest = 5
	sceneUse    = 7
	sceneLinks  = 8
)

// scenes are the product's story, in its order: what a Playbook's
// owner meets first comes first.
func scenes() []scene {
	return []scene{
		{title: "reminders and deletion", play: (*story).remind},
		{title: "an extension", during: 1},
		{title: "sleep, then wake by kubectl timeout wake and by an exec", play: (*story).sleep, alongside: true},
		{title: "the deleted Playbooks' namespaces reclaimed", play: (*story).reclaim},
		{title: "an owner's digest", play: (*story).digest, alongside: true},
		{title: "the audit trail, the archive and a restore", play: (*story).archive},
		{title: "lifetimes that follow use", play: (*story).useAct, alongside: true},
		// Not alongside: it restarts the controller.
		{title: "acting from a message", play: (*story).linksAct},
	}
}

// set is what every scene plays with.
type set struct {
	cfg   *rest.Config
	cl    client.WithWatch
	c     *proc
	rc    *receivers
	files *workdir
	// k is the plugin, narrating where the scene narrates.
	k *kubectl
	// hook is the address the controller serves its admission webhook on.
	hook string
}

// story is the demo's cast and what became of it.
type story struct {
	n        *narrator
	cast     []*role
	schedule expiry.Schedule
	files    *workdir
	kubectl  *kubectl
	// hook is the controller's admission webhook address.
	hook string

	onTime, late, early, lost int

	// seen holds the channel and id of every message, to tell duplicates.
	seen       map[string]bool
	reminders  map[string]int
	duplicates int
	refused    int
	// problems are what went wrong, found as the scenes play; mu guards
	// them against the scenes played alongside.
	mu       sync.Mutex
	problems []string

	// useCast are the Playbooks of the scene on use, linkCast those of the
	// scene on links.
	useCast  []*useRole
	linkCast []*useRole
	// cue starts the scenes played alongside; the first scene calls it
	// once its Playbooks are listed.
	cue func()
	// facts are what the demo gathered for its results, besides what it
	// printed; results completes them.
	facts results
}

// play sets up the administrator's part and plays the scenes in order.
func (s *story) play(ctx context.Context, cfg *rest.Config, c *proc, rc *receivers) error {
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(v1alpha1.AddToScheme(scheme))
	cl, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	if err := s.prologue(ctx, cl, rc); err != nil {
		return err
	}
	base := set{cfg: cfg, cl: cl, c: c, rc: rc, files: s.files, k: s.kubectl, hook: s.hook}

	// The scenes played alongside end before play returns, whatever
	// happens: they use the controller and the receivers.
	sceneCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { stop(); wg.Wait() }()
	cued := make(chan struct{})
	var once sync.Once
	s.cue = func() { once.Do(func() { close(cued) }) }
	type played struct {
		out bytes.Buffer
		sub *story
		err error
	}
	all := scenes()
	side := make([]chan *played, len(all))
	for i, sc := range all {
		if !sc.alongside {
			continue
		}
		side[i] = make(chan *played, 1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := &played{}
			select {
			case <-cued:
			case <-sceneCtx.Done():
				p.err = context.Cause(ctx)
				side[i] <- p
				return
			}
			n := &narrator{out: &p.out, start: s.n.start}
			n.say("scene %d, %s, starts alongside scene 1", i+1, sc.title)
			own := base
			own.k = s.kubectl.narrating(n)
			p.sub = &story{n: n, files: s.files, hook: s.hook, kubectl: own.k}
			p.err = sc.play(p.sub, sceneCtx, &own)
			side[i] <- p
		}()
	}

	for i, sc := range all {
		if sc.during != 0 {
			continue
		}
		s.n.scene(i+1, sc.title)
		if !sc.alongside {
			if err := sc.play(s, ctx, &base); err != nil {
				return err
			}
			continue
		}
		var p *played
		select {
		case p = <-side[i]:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
		_, _ = s.n.out.Write(p.out.Bytes())
		if p.sub != nil {
			s.join(p.sub)
		}
		if p.err != nil {
			return fmt.Errorf("scene %d, %s: %w", i+1, sc.title, p.err)
		}
	}
	return s.gather(ctx, cl, rc)
}

// prologue is the administrator's part: the webhook's signing key, the
// channels, and the admission policies that make a channel's use a
// permission.
func (s *story) prologue(ctx context.Context, cl client.Client, rc *receivers) error {
	if err := createSecret(ctx, cl, rc.secret); err != nil {
		return err
	}
	s.n.say("created Secret %s/%s with the key the controller signs webhooks with; the receiver knows it too", secretNamespace, secretName)

	channels := []*v1alpha1.NotificationChannel{
		{ObjectMeta: metav1.ObjectMeta{Name: mailChannel}, Spec: v1alpha1.NotificationChannelSpec{
			Email: &v1alpha1.EmailChannel{Host: rc.mailHost, Port: rc.mailPort, Security: "None", From: mailFrom},
		}},
		{ObjectMeta: metav1.ObjectMeta{Name: webhookName}, Spec: v1alpha1.NotificationChannelSpec{
			Webhook: &v1alpha1.WebhookChannel{URL: rc.webhookURL,
				SecretRef: v1alpha1.SecretKeySelector{Namespace: secretNamespace, Name: secretName, Key: secretKey}},
		}},
	}
	for _, ch := range channels {
		if err := cl.Create(ctx, ch); err != nil {
			return fmt.Errorf("create NotificationChannel %s: %w", ch.Name, err)
		}
	}
	s.n.say("created NotificationChannels %s (SMTP) and %s (webhook): the administrator's, naming servers and Secrets", mailChannel, webhookName)
	if err := installChannelAdmission(ctx, cl); err != nil {
		return err
	}
	s.n.say("installed the admission policies of config/admission that stamp each TimeoutPolicy with its author: the controller sends through a channel only for an author granted the verb use on it")
	return nil
}

// createSecret puts the webhook signing key where the policy says it is.
func createSecret(ctx context.Context, cl client.Client, value string) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: secretNamespace}}
	if err := cl.Create(ctx, ns); err != nil {
		return fmt.Errorf("create namespace %s: %w", secretNamespace, err)
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: secretNamespace, Name: secretName},
		Data:       map[string][]byte{secretKey: []byte(value)},
	}
	if err := cl.Create(ctx, secret); err != nil {
		return fmt.Errorf("create Secret %s/%s: %w", secretNamespace, secretName, err)
	}
	return nil
}

// join takes in what a scene played alongside found.
func (s *story) join(sub *story) {
	for _, p := range sub.problemsSoFar() {
		s.problem("%s", p)
	}
	if sub.facts.sleep != nil {
		s.facts.sleep = sub.facts.sleep
	}
	if sub.facts.digest != nil {
		s.facts.digest = sub.facts.digest
	}
	s.useCast = append(s.useCast, sub.useCast...)
	s.linkCast = append(s.linkCast, sub.linkCast...)
	if sub.facts.link.actionsPID != 0 {
		s.facts.link = sub.facts.link
	}
	s.facts.messages = append(s.facts.messages, sub.facts.messages...)
	s.early += sub.early
}

func (s *story) problem(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.problems = append(s.problems, fmt.Sprintf(format, args...))
}

// problemsSoFar returns a copy of the problems found so far.
func (s *story) problemsSoFar() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.problems...)
}

// verdict fails the demo on what must never happen: a deletion before
// expiry or before the minimum notice, a kept Playbook deleted, a message
// sent twice or badly signed, a reminder missing or after the deletion,
// a sleep, a wake or a digest early, late, missing or doubled.
func (s *story) verdict() error {
	var errs []error
	if s.early > 0 || s.lost > 0 {
		errs = append(errs, errors.New("the controller deleted Playbooks it should not have: see above"))
	}
	if s.duplicates > 0 {
		errs = append(errs, fmt.Errorf("the controller sent %d messages twice", s.duplicates))
	}
	if s.refused > 0 {
		errs = append(errs, fmt.Errorf("the webhook receiver refused %d requests", s.refused))
	}
	if p := s.problemsSoFar(); len(p) > 0 {
		errs = append(errs, fmt.Errorf("%d problems: see above", len(p)))
	}
	return errors.Join(errs...)
}
