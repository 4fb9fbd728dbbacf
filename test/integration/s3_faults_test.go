// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/amphitheatre-app/timeout-controller/internal/archive"
	"github.com/amphitheatre-app/timeout-controller/internal/expiry"
)

// faultyS3 is a proxy in front of the test S3 server that spoils its
// answers to the first PUTs of objects, as a load balancer dropping a
// connection or an overloaded server would.
type faultyS3 struct {
	URL   string
	proxy *httputil.ReverseProxy
	spoil func(w http.ResponseWriter, r *http.Request)

	mu sync.Mutex
	// left is how many PUTs are still to be spoiled; spoiled how many were.
	left, spoiled int
	// stored is when the server's acceptance of each PUT it stored was
	// passed on, before the client could read it.
	stored []time.Time
}

func newFaultyS3(t *testing.T, spoil func(*faultyS3, http.ResponseWriter, *http.Request), times int) *faultyS3 {
	t.Helper()
	target, err := url.Parse(s3Server(t))
	if err != nil {
		t.Fatal(err)
	}
	p := &faultyS3{proxy: httputil.NewSingleHostReverseProxy(target), left: times}
	// The Host header stays the proxy's: the request is signed for it.
	p.spoil = func(w http.ResponseWriter, r *http.Request) { spoil(p, w, r) }
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	p.URL = srv.URL
	return p
}

func (p *faultyS3) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// An object's PUT has a bucket and a key in its path; a bucket's has
	// only the bucket.
	put := r.Method == http.MethodPut && strings.Count(strings.Trim(r.URL.Path, "/"), "/") >= 1
	if put {
		p.mu.Lock()
		spoil := p.left > 0
		if spoil {
			p.left--
			p.spoiled++
		}
		p.mu.Unlock()
		if spoil {
			p.spoil(w, r)
			return
		}
		w = &storedWriter{ResponseWriter: w, p: p}
	}
	p.proxy.ServeHTTP(w, r)
}

// storedWriter notes the time of a PUT's success before passing it on.
type storedWriter struct {
	http.ResponseWriter
	p *faultyS3
}

func (s *storedWriter) WriteHeader(code int) {
	if code == http.StatusOK {
		s.p.mu.Lock()
		s.p.stored = append(s.p.stored, time.Now())
		s.p.mu.Unlock()
	}
	s.ResponseWriter.WriteHeader(code)
}

func (p *faultyS3) counts() (spoiled int, stored []time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.spoiled, append([]time.Time(nil), p.stored...)
}

// resetConnection closes the client's connection with a TCP reset.
func resetConnection(t *testing.T, w http.ResponseWriter) {
	conn, _, err := w.(http.Hijacker).Hijack()
	if err != nil {
		t.Errorf("hijack the connection to reset it: %v", err)
		return
	}
	if tcp, ok := conn.(*net.TCPConn); ok {
		_ = tcp.SetLinger(0)
	}
	_ = conn.Close()
}

// The archive is written before the delete, whatever the S3 server's
// connection does once: an object is deleted only after the server
// stored its manifest, and one whose every PUT fails is not deleted.
func TestS3ArchiveSurvivesAFaultOnce(t *testing.T) {
	t.Parallel()
	const bucket = "s3-faults"
	newBucket(t, bucket)
	tests := []struct {
		name  string
		spoil func(*faultyS3, http.ResponseWriter, *http.Request)
		// times is how many PUTs are spoiled.
		times int
	}{
		{"deletes after the archive when the first PUT's connection is reset before the server has it", func(_ *faultyS3, w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			resetConnection(t, w)
		}, 1},
		{"deletes after the archive when the answer to the first PUT is lost to a reset", func(p *faultyS3, w http.ResponseWriter, r *http.Request) {
			lost := httptest.NewRecorder()
			p.proxy.ServeHTTP(lost, r)
			if lost.Code != http.StatusOK {
				t.Errorf("the S3 server answered the PUT %d: %s", lost.Code, lost.Body)
			}
			resetConnection(t, w)
		}, 1},
		{"deletes after the archive when the first PUT is answered 500", func(_ *faultyS3, w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = io.WriteString(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>InternalError</Code><Message>We encountered an internal error. Please try again.</Message></Error>`)
		}, 1},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			policy := "s3-fault-" + string(rune('a'+i))
			spec := "s3://" + bucket + "/" + policy
			proxy := newFaultyS3(t, tt.spoil, tt.times)
			archiveThrough(t, policy, spec, proxy.URL)

			pb := create(t, playbooks, newPlaybook(policy, "archived through a fault", map[string]string{expiry.AnnotationTTL: "2s"}))
			expiresAt := pb.after(2 * time.Second)
			var gone time.Time
			select {
			case gone = <-pb.gone:
			case <-time.After(time.Until(expiresAt) + 20*time.Second):
				t.Fatalf("not deleted 20s after its expiry")
			}
			if gone.Before(expiresAt) {
				t.Fatalf("deleted at %s, before its expiry %s", gone, expiresAt)
			}
			spoiled, stored := proxy.counts()
			if spoiled != tt.times {
				t.Fatalf("%d PUTs spoiled, want %d: the case tests nothing", spoiled, tt.times)
			}
			if len(stored) == 0 || !stored[0].Before(gone) {
				t.Fatalf("deleted at %s; the archive's PUTs succeeded at %v: want one before the delete", gone, stored)
			}
			t.Logf("archived %s before the delete, which came %s after the expiry", gone.Sub(stored[0]), gone.Sub(expiresAt))
			key := policy + "/amphitheatre.app/Playbook/" + string(pb.GetUID()) + ".yaml"
			got, header, err := s3Store(t, "s3://"+bucket, s3AccessKey, s3SecretKy).Read(context.Background(), key)
			if err != nil {
				t.Fatalf("deleted without its archive in the bucket: %v", err)
			}
			if header.UID != pb.GetUID() || got.GetName() != pb.GetName() {
				t.Errorf("archived %s with header %+v", got.GetName(), header)
			}
		})
	}
}

func TestS3ArchiveThatKeepsFailingKeepsTheObject(t *testing.T) {
	t.Parallel()
	const bucket, policy = "s3-faults-always", "s3-faults-always"
	newBucket(t, bucket)
	proxy := newFaultyS3(t, func(_ *faultyS3, w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		resetConnection(t, w)
	}, 1<<20)
	archiveThrough(t, policy, "s3://"+bucket+"/archive", proxy.URL)

	pb := create(t, playbooks, newPlaybook(policy, "never archived", map[string]string{expiry.AnnotationTTL: "2s"}))
	pb.expectKept(t, time.Until(pb.after(8*time.Second)))
	if spoiled, _ := proxy.counts(); spoiled == 0 {
		t.Fatal("no PUT reached the proxy: the case tests nothing")
	}
	warning := findEvent(t, eventNamespace, pb.GetName(), "ArchiveFailed")
	mustContain(t, warning.Note, "not deleted")
	if _, stored := proxy.counts(); len(stored) != 0 {
		t.Errorf("PUTs stored at %v through a proxy that resets them all", stored)
	}
}

// archiveThrough creates an archiving policy whose archive is the S3
// store spec, reached through the server at endpoint (a faulty proxy).
func archiveThrough(t *testing.T, policy, spec, endpoint string) {
	t.Helper()
	store, err := archive.OpenS3(spec, archive.S3Options{Endpoint: endpoint, PathStyle: true, Region: "us-east-1",
		AccessKeyID: s3AccessKey, SecretAccessKey: s3SecretKy})
	if err != nil {
		t.Fatal(err)
	}
	p := playbookPolicy(policy, "1h")
	p.Deletion.Archive = true
	createPolicy(t, policy, p)
	archives.route(t, policy, store)
}
