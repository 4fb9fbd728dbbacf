// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package archive

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"path"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/minio/minio-go/v7/pkg/encrypt"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

const s3Scheme = "s3://"

// S3Options configure the S3 store. The credentials are the AWS ones:
// given here (from the environment, which a Secret fills), or else found
// the way AWS workloads find them (web identity, ECS, EC2 metadata).
type S3Options struct {
	// Endpoint is the server's URL, https://s3.amazonaws.com when empty;
	// an http:// URL talks plain HTTP.
	Endpoint string
	Region   string
	// PathStyle addresses the bucket in the path (endpoint/bucket/key)
	// rather than in the host name, as most S3-compatible servers want.
	PathStyle bool
	// SSE asks the server to encrypt each object: "AES256" or "aws:kms"
	// (with SSEKMSKeyID, or the bucket's default key); empty leaves it to
	// the bucket's own setting.
	SSE         string
	SSEKMSKeyID string

	AccessKeyID, SecretAccessKey, SessionToken string
}

// S3 is a Store of one object per archived object, at
// <prefix>/<group>/<Kind>/<uid>.yaml in Bucket, the layout of Dir.
type S3 struct {
	Bucket, Prefix string

	client *minio.Client
	sse    encrypt.ServerSide
	where  string
}

// OpenS3 returns the store that spec, s3://bucket/prefix, names. It does
// not reach the server.
func OpenS3(spec string, o S3Options) (*S3, error) {
	bucket, prefix, _ := strings.Cut(strings.TrimPrefix(spec, s3Scheme), "/")
	if bucket == "" {
		return nil, fmt.Errorf("archive %q: no bucket; write s3://BUCKET/PREFIX", spec)
	}
	endpoint := o.Endpoint
	if endpoint == "" {
		endpoint = "https://s3.amazonaws.com"
	}
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") || strings.Trim(u.Path, "/") != "" {
		return nil, fmt.Errorf("S3 endpoint %q: want http(s)://HOST[:PORT]", endpoint)
	}
	creds := credentials.NewIAM("")
	if o.AccessKeyID != "" || o.SecretAccessKey != "" {
		creds = credentials.NewStaticV4(o.AccessKeyID, o.SecretAccessKey, o.SessionToken)
	}
	lookup := minio.BucketLookupAuto
	if o.PathStyle {
		lookup = minio.BucketLookupPath
	}
	c, err := minio.New(u.Host, &minio.Options{Creds: creds, Secure: u.Scheme == "https", Region: o.Region, BucketLookup: lookup})
	if err != nil {
		return nil, fmt.Errorf("S3 client for %s: %w", endpoint, err)
	}
	s := &S3{Bucket: bucket, Prefix: strings.Trim(prefix, "/"), client: c, where: s3Scheme + strings.TrimSuffix(bucket+"/"+strings.Trim(prefix, "/"), "/")}
	switch o.SSE {
	case "":
	case "AES256":
		s.sse = encrypt.NewSSE()
	case "aws:kms":
		if s.sse, err = encrypt.NewSSEKMS(o.SSEKMSKeyID, nil); err != nil {
			return nil, fmt.Errorf("S3 server-side encryption: %w", err)
		}
	default:
		return nil, fmt.Errorf("S3 server-side encryption %q: want AES256 or aws:kms", o.SSE)
	}
	return s, nil
}

// key returns the object key of the archive of the object of kind gk
// with uid.
func (s *S3) key(gk schema.GroupKind, uid string) string {
	group := gk.Group
	if group == "" {
		group = "core"
	}
	return path.Join(s.Prefix, group, gk.Kind, uid+ext)
}

// Write implements Store. The object is written in one PUT, which the
// server acknowledges once it is stored.
func (s *S3) Write(ctx context.Context, obj *unstructured.Unstructured, h Header) (string, error) {
	doc, h, err := encode(obj, h)
	if err != nil {
		return "", err
	}
	key := s.key(schema.GroupKind{Group: h.Group, Kind: h.Kind}, string(h.UID))
	_, err = s.client.PutObject(ctx, s.Bucket, key, bytes.NewReader(doc), int64(len(doc)),
		minio.PutObjectOptions{ContentType: "application/yaml", ServerSideEncryption: s.sse, DisableMultipart: true})
	if err != nil {
		return "", fmt.Errorf("archive %s/%s to %s: %w", h.Kind, h.Name, s.where, s.explain(err))
	}
	return key, nil
}

// explain turns the server's answer into what the operator should check.
// A missing bucket or key is fs.ErrNotExist, as a missing directory or
// file is for Dir, so that callers tell "not there" from "cannot read".
func (s *S3) explain(err error) error {
	switch minio.ToErrorResponse(err).Code {
	case "NoSuchBucket":
		return notExist{fmt.Errorf("bucket %q does not exist: %w", s.Bucket, err)}
	case "NoSuchKey":
		return notExist{err}
	case "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "ExpiredToken", "InvalidToken":
		return fmt.Errorf("the S3 server refused the credentials: %w", err)
	}
	return err
}

// notExist is an error of the S3 server that says the bucket or the key
// is not there.
type notExist struct{ error }

func (e notExist) Is(target error) bool { return target == fs.ErrNotExist }
func (e notExist) Unwrap() error        { return e.error }

// objects lists the archive's objects in the layout, or stops at the
// first error.
func (s *S3) objects(ctx context.Context, each func(minio.ObjectInfo) error) error {
	prefix := ""
	if s.Prefix != "" {
		prefix = s.Prefix + "/"
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for o := range s.client.ListObjects(ctx, s.Bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
		if o.Err != nil {
			return fmt.Errorf("list %s: %w", s.where, s.explain(o.Err))
		}
		rel := strings.TrimPrefix(o.Key, prefix)
		if !strings.HasSuffix(rel, ext) || len(strings.Split(rel, "/")) != 3 {
			continue
		}
		if err := each(o); err != nil {
			return err
		}
	}
	return nil
}

// List implements Store. It reads the header of each archived object (a
// ranged GET each); one that cannot be read is left out.
func (s *S3) List(ctx context.Context) ([]Entry, error) {
	var entries []Entry
	err := s.objects(ctx, func(o minio.ObjectInfo) error {
		h, err := s.header(ctx, o.Key)
		if err != nil || h.Name == "" {
			return nil //nolint:nilerr // an unreadable object is left out, as in a directory
		}
		entries = append(entries, Entry{Path: o.Key, GroupKind: schema.GroupKind{Group: h.Group, Kind: h.Kind},
			Namespace: h.Namespace, Name: h.Name, Title: h.Title, UID: h.UID, ModTime: o.LastModified})
		return nil
	})
	if err != nil {
		return nil, err
	}
	sortNewestFirst(entries)
	return entries, nil
}

func (s *S3) header(ctx context.Context, key string) (Header, error) {
	opts := minio.GetObjectOptions{}
	if err := opts.SetRange(0, maxHeader-1); err != nil {
		return Header{}, err
	}
	r, err := s.client.GetObject(ctx, s.Bucket, key, opts)
	if err != nil {
		return Header{}, err
	}
	defer func() { _ = r.Close() }()
	data, err := io.ReadAll(io.LimitReader(r, maxHeader))
	if err != nil {
		return Header{}, err
	}
	line, _, ok := bytes.Cut(data, []byte("\n"))
	if !ok {
		return Header{}, errors.New("no archive header")
	}
	return parseHeader(line)
}

// Read implements Store: where is the object's key.
func (s *S3) Read(ctx context.Context, where string) (*unstructured.Unstructured, Header, error) {
	r, err := s.client.GetObject(ctx, s.Bucket, where, minio.GetObjectOptions{})
	if err != nil {
		return nil, Header{}, fmt.Errorf("read %s/%s: %w", s.where, where, s.explain(err))
	}
	defer func() { _ = r.Close() }()
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, Header{}, fmt.Errorf("read %s/%s: %w", s.where, where, s.explain(err))
	}
	return decode(s3Scheme+s.Bucket+"/"+where, data)
}

// Prune implements Store, by the objects' last-modified times. A bucket
// lifecycle rule on the prefix can do the same instead.
func (s *S3) Prune(ctx context.Context, cutoff time.Time) (int, error) {
	removed := 0
	var errs []error
	err := s.objects(ctx, func(o minio.ObjectInfo) error {
		if !o.LastModified.Before(cutoff) {
			return nil
		}
		if err := s.client.RemoveObject(ctx, s.Bucket, o.Key, minio.RemoveObjectOptions{}); err != nil {
			errs = append(errs, fmt.Errorf("remove %s/%s: %w", s.where, o.Key, s.explain(err)))
			return nil
		}
		removed++
		return nil
	})
	return removed, errors.Join(append(errs, err)...)
}

func (s *S3) String() string { return s.where }
