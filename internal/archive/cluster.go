// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package archive

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ClusterSpec names the cluster store in --archive and --from.
const ClusterSpec = "cluster"

// The cluster store's Secrets: their type, the key of the document, and
// their labels and annotation.
const (
	SecretType   corev1.SecretType = "timeout.amphitheatre.app/archive"
	SecretKey    string            = "manifest.yaml"
	secretPrefix string            = "timeout-archive-"

	LabelArchive = "timeout.amphitheatre.app/archive"
	LabelGroup   = "timeout.amphitheatre.app/archived-group"
	LabelKind    = "timeout.amphitheatre.app/archived-kind"
	LabelName    = "timeout.amphitheatre.app/archived-name"
	LabelUID     = "timeout.amphitheatre.app/archived-uid"
	LabelPolicy  = "timeout.amphitheatre.app/archived-policy"
	// AnnotationHeader holds the document's header, so that listing and
	// pruning read metadata only, never the manifests.
	AnnotationHeader = "timeout.amphitheatre.app/archive-header"
)

// MaxClusterManifest is the largest document the cluster store keeps:
// what the API server accepts in a Secret's data.
const MaxClusterManifest = corev1.MaxSecretSize

// ErrTooLarge is returned by the cluster store for a manifest it cannot
// keep in one Secret.
var ErrTooLarge = errors.New("too large for a Secret")

// Kube is how the cluster store reaches the API server. Reader should
// read from the API server, not a cache: the controller caches no
// Secrets.
type Kube struct {
	Reader client.Reader
	Writer client.Writer
}

// Cluster is a Store of one Secret per archived object in Namespace, the
// controller's own. Secrets rather than ConfigMaps: a manifest can hold
// what its owner would not show everyone who may read ConfigMaps, and
// Secrets are what clusters encrypt at rest and guard with RBAC.
type Cluster struct {
	Kube      Kube
	Namespace string
}

// SecretName returns the name of the Secret that archives the object
// with uid: bounded whatever the object's name, as a UID is at most 36
// characters.
func SecretName(uid string) string { return secretPrefix + uid }

// Write implements Store. A manifest over MaxClusterManifest is refused
// with ErrTooLarge.
func (c *Cluster) Write(ctx context.Context, obj *unstructured.Unstructured, h Header) (string, error) {
	doc, h, err := encode(obj, h)
	if err != nil {
		return "", err
	}
	name := SecretName(string(h.UID))
	if len(doc) > MaxClusterManifest {
		return "", fmt.Errorf("archive %s/%s: its manifest is %d bytes, over the %d a Secret holds (%w): archive this kind to S3 or a directory instead",
			h.Kind, h.Name, len(doc), MaxClusterManifest, ErrTooLarge)
	}
	hj, err := json.Marshal(h)
	if err != nil {
		return "", err
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Namespace:   c.Namespace,
			Labels:      labelsOf(h),
			Annotations: map[string]string{AnnotationHeader: string(hj)},
		},
		Type: SecretType,
		Data: map[string][]byte{SecretKey: doc},
	}
	err = c.Kube.Writer.Create(ctx, secret)
	if apierrors.IsAlreadyExists(err) {
		// The object was archived before and its deletion did not
		// happen; this archive replaces that one.
		var old corev1.Secret
		if err = c.Kube.Reader.Get(ctx, client.ObjectKeyFromObject(secret), &old); err == nil {
			secret.ResourceVersion = old.ResourceVersion
			err = c.Kube.Writer.Update(ctx, secret)
		}
	}
	if err != nil {
		return "", fmt.Errorf("archive %s/%s in Secret %s/%s: %w", h.Kind, h.Name, c.Namespace, name, err)
	}
	return name, nil
}

// labelsOf returns the labels that select a Secret by the archived
// object: its values where they are valid label values, else their
// hashes (names and policies can be longer than the 63 characters a
// label value holds). The header has the values themselves.
func labelsOf(h Header) map[string]string {
	return map[string]string{
		LabelArchive: "true",
		LabelGroup:   LabelValue(h.Group),
		LabelKind:    LabelValue(h.Kind),
		LabelName:    LabelValue(h.Name),
		LabelUID:     LabelValue(string(h.UID)),
		LabelPolicy:  LabelValue(h.Policy),
	}
}

// LabelValue returns v when it is a valid label value, else "sha256-"
// and the first 48 hex digits of its SHA-256.
func LabelValue(v string) string {
	if len(validation.IsValidLabelValue(v)) == 0 {
		return v
	}
	sum := sha256.Sum256([]byte(v))
	return "sha256-" + hex.EncodeToString(sum[:24])
}

// List implements Store. It reads the Secrets' metadata only.
func (c *Cluster) List(ctx context.Context) ([]Entry, error) {
	list, err := c.list(ctx)
	if err != nil {
		return nil, err
	}
	entries := make([]Entry, 0, len(list.Items))
	for i := range list.Items {
		if e, ok := entryOfSecret(&list.Items[i]); ok {
			entries = append(entries, e)
		}
	}
	sortNewestFirst(entries)
	return entries, nil
}

func (c *Cluster) list(ctx context.Context) (*metav1.PartialObjectMetadataList, error) {
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("SecretList"))
	if err := c.Kube.Reader.List(ctx, list, client.InNamespace(c.Namespace), client.MatchingLabels{LabelArchive: "true"}); err != nil {
		return nil, fmt.Errorf("list the archive's Secrets in %s: %w", c.Namespace, err)
	}
	return list, nil
}

// entryOfSecret reads an entry from a Secret's metadata; the time is
// when it was archived, by the header, or else when the Secret was made.
func entryOfSecret(m *metav1.PartialObjectMetadata) (Entry, bool) {
	var h Header
	if err := json.Unmarshal([]byte(m.GetAnnotations()[AnnotationHeader]), &h); err != nil || h.Name == "" {
		return Entry{}, false
	}
	at := h.ArchivedAt
	if at.IsZero() {
		at = m.GetCreationTimestamp().Time
	}
	return Entry{Path: m.GetName(), GroupKind: schema.GroupKind{Group: h.Group, Kind: h.Kind}, Namespace: h.Namespace,
		Name: h.Name, Title: h.Title, UID: h.UID, ModTime: at}, true
}

// Read implements Store: where is the Secret's name.
func (c *Cluster) Read(ctx context.Context, where string) (*unstructured.Unstructured, Header, error) {
	var s corev1.Secret
	if err := c.Kube.Reader.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: where}, &s); err != nil {
		return nil, Header{}, fmt.Errorf("read the archive Secret %s/%s: %w", c.Namespace, where, err)
	}
	if s.Type != SecretType {
		return nil, Header{}, fmt.Errorf("the Secret %s/%s is not an archive (type %q)", c.Namespace, where, s.Type)
	}
	return decode("Secret "+c.Namespace+"/"+where, s.Data[SecretKey])
}

// Prune implements Store. Each Secret is deleted on the condition that it
// is the one listed, so that an archive written again meanwhile stays.
func (c *Cluster) Prune(ctx context.Context, cutoff time.Time) (int, error) {
	list, err := c.list(ctx)
	if err != nil {
		return 0, err
	}
	removed := 0
	var errs []error
	for i := range list.Items {
		m := &list.Items[i]
		e, ok := entryOfSecret(m)
		if !ok || !e.ModTime.Before(cutoff) {
			continue
		}
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: m.GetName(), Namespace: m.GetNamespace()}}
		err := c.Kube.Writer.Delete(ctx, s, client.Preconditions{UID: &m.UID, ResourceVersion: &m.ResourceVersion})
		switch {
		case err == nil:
			removed++
		case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
		default:
			errs = append(errs, fmt.Errorf("delete the archive Secret %s/%s: %w", m.GetNamespace(), m.GetName(), err))
		}
	}
	return removed, errors.Join(errs...)
}

func (c *Cluster) String() string { return "Secrets in namespace " + c.Namespace }
