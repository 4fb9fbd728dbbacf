// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/amphitheatre-app/timeout-controller/api/v1alpha1"
	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
	"github.com/amphitheatre-app/timeout-controller/internal/notify"
	"github.com/amphitheatre-app/timeout-controller/internal/testenv/fixture"
)

const secretNamespace = "timeout-secrets"

// webhookSecret stores a signing key in a Secret and returns its reference.
func webhookSecret(t *testing.T, name string, key []byte) v1alpha1.SecretKeySelector {
	t.Helper()
	ctx := context.Background()
	_ = k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: secretNamespace}})
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: secretNamespace, Name: name}, Data: map[string][]byte{"key": key}}
	if err := k8s.Create(ctx, s); err != nil {
		t.Fatal(err)
	}
	secrets = append(secrets, string(key))
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), s) })
	return v1alpha1.SecretKeySelector{Namespace: secretNamespace, Name: name, Key: "key"}
}

// reminderPolicy governs the Playbooks labelled for test, reminding with
// leads in seconds through a mailbox and a webhook receiver.
func reminderPolicy(t *testing.T, test string, reminders []v1alpha1.Duration, notice v1alpha1.Duration, mb *fixture.Mailbox, rc *receiver) v1alpha1.TimeoutPolicySpec {
	t.Helper()
	spec := playbookPolicy(test, "1h")
	spec.Reminders = reminders
	spec.MinimumNotice = notice
	if mb != nil {
		host, port := mb.Host, mb.Port
		createChannel(t, test+"-mail", v1alpha1.NotificationChannelSpec{Email: &v1alpha1.EmailChannel{
			Host: host, Port: port, Security: "None", From: "timeout@example.com",
		}})
		spec.Notifications.Channels = append(spec.Notifications.Channels,
			v1alpha1.ChannelReference{Name: test + "-mail", To: []string{"ops@example.com"}})
	}
	if rc != nil {
		createChannel(t, test+"-webhook", v1alpha1.NotificationChannelSpec{Webhook: &v1alpha1.WebhookChannel{
			URL: rc.url, SecretRef: webhookSecret(t, test+"-webhook", rc.key),
		}})
		spec.Notifications.Channels = append(spec.Notifications.Channels, v1alpha1.ChannelReference{Name: test + "-webhook"})
	}
	return spec
}

// expectEvents waits until the receiver holds n events of type typ about
// subject, then checks that no more arrive for a moment.
func (rc *receiver) expectEvents(t *testing.T, subject, typ string, n int, within time.Duration) []cloudEvent {
	t.Helper()
	fixture.Eventually(t, within, fmt.Sprintf("%d %s events for %s", n, typ, subject), func() (bool, error) {
		return len(rc.events(subject, typ)) >= n, nil
	})
	time.Sleep(300 * time.Millisecond)
	got := rc.events(subject, typ)
	if len(got) != n {
		t.Fatalf("%d %s events for %s, want exactly %d: %+v", len(got), typ, subject, n, got)
	}
	if bad := rc.rejected(); len(bad) > 0 {
		t.Fatalf("the receiver rejected deliveries: %v", bad)
	}
	return got
}

// TestRemindersGoOutOnceAcrossARestart is not parallel: it restarts the
// controller, which the parallel tests must not see.
func TestRemindersGoOutOnceAcrossARestart(t *testing.T) {
	mb := fixture.NewMailbox(t, nil)
	rc := startReceiver(t, []byte("whsec-not-a-real-key-5b0c1e"))
	createPolicy(t, "reminders", reminderPolicy(t, "reminders", []v1alpha1.Duration{"6s", "3s"}, "2s", mb, rc))

	// The mail server refuses at first, so that the restart below comes in
	// the middle of retrying the e-mail of the first stage.
	mb.Refuse(true)
	pb := create(t, playbooks, newPlaybook("reminders", "hello-go", map[string]string{
		expiry.AnnotationTTL:    "10s",
		notify.AnnotationNotify: "alice@example.com, #team-amp",
	}))
	short := create(t, playbooks, newPlaybook("reminders", "brief", map[string]string{expiry.AnnotationTTL: "2s"}))
	expiresAt := pb.after(10 * time.Second)

	first := rc.expectEvents(t, pb.GetName(), "reminder", 1, 9*time.Second)[0]
	checkReminder(t, first, pb, "6s", expiresAt.Add(-6*time.Second))

	// The record is on the object: the webhook has the first stage, the
	// e-mail has not.
	got, err := dyn.Resource(playbooks).Get(context.Background(), pb.GetName(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := expiry.ParseRecord(got.GetAnnotations()[expiry.AnnotationReminders])
	if err != nil || rec == nil || !slices.Equal(rec.Sent["6s"].Channels, []string{"reminders-webhook"}) || rec.Title != "hello-go" {
		t.Fatalf("record after the first stage = %+v (%v)", rec, err)
	}

	if err := stopController(); err != nil {
		t.Fatal(err)
	}
	mb.Refuse(false)
	if _, err := startController(restConfig, testScheme); err != nil {
		t.Fatal(err)
	}
	// The new process retries the e-mail, and only the e-mail.
	fixture.Eventually(t, 2*time.Second, "the first stage by e-mail after the restart", func() (bool, error) {
		for _, m := range mb.WithHeader("X-Timeout-Object", pb.GetName()) {
			if m.Header.Get("X-Timeout-Event") == "reminder" {
				return true, nil
			}
		}
		return false, nil
	})
	if n := len(rc.events(pb.GetName(), "reminder")); n != 1 {
		t.Fatalf("%d webhook reminders after the restart, want the one sent before it", n)
	}

	reminders := rc.expectEvents(t, pb.GetName(), "reminder", 2, 6*time.Second)
	checkReminder(t, reminders[1], pb, "3s", expiresAt.Add(-3*time.Second))
	if reminders[0].ID == reminders[1].ID {
		t.Errorf("both stages carry id %s", reminders[0].ID)
	}
	pb.expectDeletedOnTime(t, expiresAt)
	rc.expectEvents(t, pb.GetName(), "deleted", 1, 5*time.Second)

	mails := mb.WithHeader("X-Timeout-Object", pb.GetName())
	var reminderMails int
	for _, m := range mails {
		if m.Header.Get("X-Timeout-Event") == "reminder" {
			reminderMails++
			for _, want := range []string{"alice@example.com", "ops@example.com"} {
				if !slices.Contains(m.To, want) {
					t.Errorf("reminder mail went to %v, not to %s", m.To, want)
				}
			}
			mustContain(t, m.Header.Get("Subject"), "hello-go")
		}
	}
	if reminderMails != 2 {
		t.Errorf("%d reminder mails, want one per stage: 2", reminderMails)
	}
	findEvent(t, eventNamespace, pb.GetName(), "MessageSent")

	// Shorter-lived than every lead: no reminder, deleted on time, and
	// told about afterwards.
	short.expectDeletedOnTime(t, short.after(2*time.Second))
	if n := len(rc.events(short.GetName(), "reminder")); n != 0 {
		t.Errorf("%d reminders for an object that lives less than the shortest lead", n)
	}
	rc.expectEvents(t, short.GetName(), "deleted", 1, 5*time.Second)
}

func checkReminder(t *testing.T, ev cloudEvent, pb *tracked, stage string, due time.Time) {
	t.Helper()
	lag := ev.arrived.Sub(due)
	t.Logf("%s reminder arrived %s after it was due", stage, lag)
	if lag < 0 || lag > time.Second {
		t.Errorf("%s reminder arrived %s after it was due; want within 1s and never before", stage, lag)
	}
	d := ev.Data
	if d["stage"] != stage || d["name"] != pb.GetName() || d["uid"] != string(pb.GetUID()) || d["title"] != "hello-go" ||
		d["kind"] != "Playbook" || d["apiVersion"] != "amphitheatre.app/v1" || d["policy"] != "reminders" {
		t.Errorf("reminder data = %v", d)
	}
	if at, err := time.Parse(time.RFC3339, fmt.Sprint(d["expiresAt"])); err != nil || !at.Equal(pb.after(10*time.Second)) {
		t.Errorf("expiresAt = %v, want %s", d["expiresAt"], pb.after(10*time.Second))
	}
}

func TestAnObjectFirstSeenLateGetsOneReminderAndItsNotice(t *testing.T) {
	t.Parallel()
	rc := startReceiver(t, []byte("catch-up-signing-key-91d2"))
	createPolicy(t, "catch-up", reminderPolicy(t, "catch-up", []v1alpha1.Duration{"4s", "2s"}, "3s", nil, rc))

	// Not governed until it is labelled, well inside both reminder windows.
	pb := create(t, playbooks, newPlaybook("not-yet", "late", map[string]string{expiry.AnnotationTTL: "8s"}))
	expiresAt := pb.after(8 * time.Second)
	time.Sleep(time.Until(expiresAt.Add(-1500 * time.Millisecond)))
	mergePatch(t, playbooks, "", pb.GetName(), fmt.Sprintf(`{"metadata":{"labels":{%q:"catch-up"}}}`, testLabel))

	reminders := rc.expectEvents(t, pb.GetName(), "reminder", 1, 3*time.Second)
	if reminders[0].Data["stage"] != "2s" {
		t.Errorf("caught up with stage %v, want only the most urgent, 2s", reminders[0].Data["stage"])
	}
	postponed := rc.expectEvents(t, pb.GetName(), "postponed", 1, 5*time.Second)[0]
	deleteAt, err := time.Parse(time.RFC3339, fmt.Sprint(postponed.Data["expiresAt"]))
	if err != nil || !deleteAt.After(expiresAt) {
		t.Fatalf("postponed to %v (%v), want after the expiry %s", postponed.Data["expiresAt"], err, expiresAt)
	}
	findEvent(t, eventNamespace, pb.GetName(), "DeletionPostponed")
	// RFC 3339 in the message drops the sub-second part of the new time.
	pb.expectDeletedOnTime(t, reminders[0].arrived.Add(3*time.Second))
	if len(rc.events(pb.GetName(), "reminder")) != 1 {
		t.Errorf("reminders: %+v", rc.events(pb.GetName(), "reminder"))
	}
}

func TestAFailingChannelIsRetriedWithoutHoldingUpTheOthers(t *testing.T) {
	t.Parallel()
	mb := fixture.NewMailbox(t, nil)
	rc := startReceiver(t, []byte("retry-signing-key-3e8a"))
	createPolicy(t, "retry", reminderPolicy(t, "retry", []v1alpha1.Duration{"10s"}, "0s", mb, rc))

	mb.Refuse(true)
	rc.failNext(2)
	pb := create(t, playbooks, newPlaybook("retry", "flaky", map[string]string{expiry.AnnotationTTL: "13s"}))

	// The receiver answers 500 twice, then takes it: delivered once.
	rc.expectEvents(t, pb.GetName(), "reminder", 1, 8*time.Second)
	failed := findEvent(t, eventNamespace, pb.GetName(), "MessageFailed")
	mustContain(t, failed.Note, "10s reminder")
	for _, s := range secrets {
		if strings.Contains(failed.Note, s) {
			t.Errorf("Event %q carries a secret", failed.Note)
		}
	}
	// The mail server comes back: e-mail gets its copy, once.
	mb.Refuse(false)
	fixture.Eventually(t, 8*time.Second, "the reminder by e-mail", func() (bool, error) {
		for _, m := range mb.WithHeader("X-Timeout-Object", pb.GetName()) {
			if m.Header.Get("X-Timeout-Event") == "reminder" {
				return true, nil
			}
		}
		return false, nil
	})
	pb.expectDeletedOnTime(t, pb.after(13*time.Second))
	var reminders int
	for _, m := range mb.WithHeader("X-Timeout-Object", pb.GetName()) {
		if m.Header.Get("X-Timeout-Event") == "reminder" {
			reminders++
		}
	}
	if reminders != 1 {
		t.Errorf("%d reminder mails, want 1", reminders)
	}
	if n := len(rc.events(pb.GetName(), "reminder")); n != 1 {
		t.Errorf("%d webhook reminders, want 1", n)
	}
}

func TestAnExtensionResendsTheRemindersForTheNewDate(t *testing.T) {
	t.Parallel()
	rc := startReceiver(t, []byte("extend-signing-key-77c1"))
	createPolicy(t, "extension", reminderPolicy(t, "extension", []v1alpha1.Duration{"4s"}, "0s", nil, rc))

	pb := create(t, playbooks, newPlaybook("extension", "growing", map[string]string{expiry.AnnotationTTL: "6s"}))
	rc.expectEvents(t, pb.GetName(), "reminder", 1, 6*time.Second)
	mergePatch(t, playbooks, "", pb.GetName(), fmt.Sprintf(`{"metadata":{"annotations":{%q:"14s"}}}`, expiry.AnnotationTTL))

	extended := rc.expectEvents(t, pb.GetName(), "extended", 1, 3*time.Second)[0]
	if at, _ := time.Parse(time.RFC3339, fmt.Sprint(extended.Data["expiresAt"])); !at.Equal(pb.after(14 * time.Second)) {
		t.Errorf("extended to %v, want %s", extended.Data["expiresAt"], pb.after(14*time.Second))
	}
	reminders := rc.expectEvents(t, pb.GetName(), "reminder", 2, 10*time.Second)
	checkLag(t, reminders[1], pb.after(10*time.Second))
	pb.expectDeletedOnTime(t, pb.after(14*time.Second))
}

func TestARecipientThatIsNotAnAddressIsRefusedAndTheOthersAreTold(t *testing.T) {
	t.Parallel()
	mb := fixture.NewMailbox(t, nil)
	createPolicy(t, "recipients", reminderPolicy(t, "recipients", []v1alpha1.Duration{"2s"}, "1s", mb, nil))

	pb := create(t, playbooks, newPlaybook("recipients", "mixed", map[string]string{
		expiry.AnnotationTTL:    "3s",
		notify.AnnotationNotify: "bob@example.com, https://attacker.example/collect, carol@",
	}))
	warning := findEvent(t, eventNamespace, pb.GetName(), "InvalidRecipient")
	mustContain(t, warning.Note, notify.AnnotationNotify, `"https://attacker.example/collect" is not an e-mail address`, `"carol@"`)
	fixture.Eventually(t, 5*time.Second, "the reminder to bob", func() (bool, error) {
		for _, m := range mb.WithHeader("X-Timeout-Object", pb.GetName()) {
			if slices.Contains(m.To, "bob@example.com") {
				return true, nil
			}
		}
		return false, nil
	})
}

func checkLag(t *testing.T, ev cloudEvent, due time.Time) {
	t.Helper()
	lag := ev.arrived.Sub(due)
	if lag < 0 || lag > onTime {
		t.Errorf("%s arrived %s after it was due; want within %s and never before", ev.Type, lag, onTime)
	}
}

func TestASlowReceiverDoesNotDelayOtherObjects(t *testing.T) {
	t.Parallel()
	rc := startReceiver(t, []byte("slow-signing-key-0a4f"))
	createPolicy(t, "slow", reminderPolicy(t, "slow", []v1alpha1.Duration{"3s"}, "0s", nil, rc))

	slow := create(t, playbooks, newPlaybook("slow", "slow", map[string]string{expiry.AnnotationTTL: "6s"}))
	// Its reminder (due at 3s) takes 10s to be accepted: a deletion that
	// waited for it would come 7s late, past onTime.
	rc.slowFor(slow.GetName(), 10*time.Second)
	fast := create(t, playbooks, newPlaybook("slow", "fast", map[string]string{expiry.AnnotationTTL: "6s"}))

	reminder := rc.expectEvents(t, fast.GetName(), "reminder", 1, 5*time.Second)[0]
	checkLag(t, reminder, fast.after(3*time.Second))
	fast.expectDeletedOnTime(t, fast.after(6*time.Second))
	// The slow delivery is still under way at expiry: it is abandoned
	// rather than allowed to make the deletion late.
	slow.expectDeletedOnTime(t, slow.after(6*time.Second))
	if rc.begun(slow.GetName()) == 0 {
		t.Fatal("the slow receiver was never sent the reminder: nothing was slow")
	}
}

func TestSecretsStayOutOfEventsStatusAndLogs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// A Slack stand-in that fails, at a URL that carries a token.
	slack := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "invalid_token "+r.URL.Path, http.StatusForbidden)
	}))
	t.Cleanup(slack.Close)
	const token, password = "sl4ck-t0ken-9f2e", "smtp-pa55word-c81b"
	slackURL := slack.URL + "/services/T000/B000/" + token
	mb := fixture.NewMailbox(t, nil) // speaks no AUTH: logging in fails
	_ = k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: secretNamespace}})
	for _, s := range []*corev1.Secret{
		{ObjectMeta: metav1.ObjectMeta{Namespace: secretNamespace, Name: "leak-slack"}, Data: map[string][]byte{"url": []byte(slackURL)}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: secretNamespace, Name: "leak-smtp"}, Data: map[string][]byte{"username": []byte("timeout"), "password": []byte(password)}},
	} {
		if err := k8s.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = k8s.Delete(context.Background(), s) })
	}
	secrets = append(secrets, token, password)

	spec := playbookPolicy("leak", "1h")
	spec.Reminders = []v1alpha1.Duration{"2s"}
	spec.MinimumNotice = "0s"
	host, port := mb.Host, mb.Port
	createChannel(t, "leak-mail", v1alpha1.NotificationChannelSpec{Email: &v1alpha1.EmailChannel{
		Host: host, Port: port, Security: "None", From: "timeout@example.com",
		CredentialsSecretRef: &v1alpha1.SecretReference{Namespace: secretNamespace, Name: "leak-smtp"},
	}})
	createChannel(t, "leak-slack", v1alpha1.NotificationChannelSpec{Slack: &v1alpha1.SlackChannel{
		WebhookURLSecretRef: v1alpha1.SecretKeySelector{Namespace: secretNamespace, Name: "leak-slack", Key: "url"},
	}})
	spec.Notifications.Channels = []v1alpha1.ChannelReference{{Name: "leak-mail", To: []string{"ops@example.com"}}, {Name: "leak-slack"}}
	createPolicy(t, "leak", spec)
	pb := create(t, playbooks, newPlaybook("leak", "leaky", map[string]string{expiry.AnnotationTTL: "3s"}))

	failed := findEvent(t, eventNamespace, pb.GetName(), "MessageFailed")
	mustContain(t, failed.Note, "via leak-mail", "via leak-slack")
	pb.expectDeletedOnTime(t, pb.after(3*time.Second))

	events, err := clients.EventsV1().Events(eventNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := getPolicy("leak")
	if err != nil {
		t.Fatal(err)
	}
	everything := fmt.Sprintf("%+v %+v", events.Items, p.Status)
	for _, s := range []string{token, password} {
		if strings.Contains(everything, s) {
			t.Errorf("a secret (%q) appears in an Event or the policy status", s)
		}
	}
}

// With no channel configured, the Kubernetes Event is the reminder: it
// counts only once the API server stored it. While the API server refuses
// it, the record shows no reminder; once it takes it, the Event is stored
// and the record shows the reminder delivered via the Events channel.
func TestAReminderEventCountsOnlyOnceStored(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	test := "event-stored"
	pb := newPlaybook(test, "refused", nil)
	refuseEventsAbout(t, pb.GetName())

	spec := playbookPolicy(test, "1h")
	// Due the moment the Playbook is created.
	spec.Reminders = []v1alpha1.Duration{"1h"}
	createPolicy(t, test, spec)
	create(t, playbooks, pb)

	deadline := time.Now().Add(3 * time.Second)
	for ; time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		rec, err := recordOf(ctx, pb.GetName())
		if err != nil {
			t.Fatal(err)
		}
		if rec == nil {
			continue
		}
		if _, ok := rec.Sent["1h"]; ok {
			t.Fatalf("record %s shows the reminder given while the API server refuses its Event", rec)
		}
	}

	allowEventsAbout(t, pb.GetName())
	fixture.Eventually(t, 40*time.Second, "the reminder on the record", func() (bool, error) {
		rec, err := recordOf(ctx, pb.GetName())
		if err != nil || rec == nil {
			return false, err
		}
		return slices.Equal(rec.Sent["1h"].Channels, []string{notify.EventsChannel}), nil
	})
	findEvent(t, eventNamespace, pb.GetName(), "MessageSent")
}

// refuseEventsAbout makes the API server refuse every Event about the
// named object, until allowEventsAbout or the end of the test.
func refuseEventsAbout(t *testing.T, name string) {
	t.Helper()
	ctx := context.Background()
	api := clients.AdmissionregistrationV1()
	policy := &admissionv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e.refuse-events." + name},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			MatchConstraints: &admissionv1.MatchResources{ResourceRules: []admissionv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionv1.RuleWithOperations{
					Operations: []admissionv1.OperationType{admissionv1.Create},
					Rule:       admissionv1.Rule{APIGroups: []string{"events.k8s.io"}, APIVersions: []string{"v1"}, Resources: []string{"events"}},
				},
			}}},
			Validations: []admissionv1.Validation{{Expression: fmt.Sprintf("object.regarding.name != %q", name)}},
		},
	}
	binding := &admissionv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: policy.Name},
		Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName: policy.Name, ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny},
		},
	}
	if _, err := api.ValidatingAdmissionPolicies().Create(ctx, policy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = api.ValidatingAdmissionPolicies().Delete(context.Background(), policy.Name, metav1.DeleteOptions{})
	})
	if _, err := api.ValidatingAdmissionPolicyBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { allowEventsAbout(t, name) })
	// The API server loads policies asynchronously.
	fixture.Eventually(t, 30*time.Second, "Events about "+name+" refused", func() (bool, error) {
		_, err := clients.EventsV1().Events(eventNamespace).Create(ctx, &eventsv1.Event{
			ObjectMeta:          metav1.ObjectMeta{GenerateName: "probe-"},
			EventTime:           metav1.NowMicro(),
			ReportingController: "e2e", ReportingInstance: "e2e", Action: "Probe", Reason: "Probe", Type: corev1.EventTypeNormal,
			Regarding: corev1.ObjectReference{Kind: "Playbook", Name: name},
		}, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return apierrors.IsInvalid(err), nil
	})
}

func allowEventsAbout(t *testing.T, name string) {
	t.Helper()
	err := clients.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Delete(context.Background(), "e2e.refuse-events."+name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
}
