// Package actions lets the people a message reaches act on the object it is
// about: signed links (tokens) that name the object, what its holder may do
// and until when, and the server that shows their pages and carries out
// their clicks.
package actions

import (
	"bytes"
	"compress/flate"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Action is what a link lets its holder do.
type Action string

const (
	View   Action = "view"   // see the page (every token allows it)
	Extend Action = "extend" // keep it longer, by the policy's link step
	Wake   Action = "wake"   // wake it (asleep or about to sleep)
	Delete Action = "delete" // I am done: delete it now (policy opt-in)
)

// Ref names the governed object a token is about.
type Ref struct {
	Group, Version, Kind string
	Namespace, Name      string
	UID                  types.UID
}

// Claims are what a token says. Exactly one of Object and Owner is set.
type Claims struct {
	// ID is random, 16 hex characters; the only part of a token that logs,
	// metrics and Events may show. Sign fills it when it is empty.
	ID string
	// Object is the object; nil for an owner's page.
	Object *Ref
	// Owner is the owner (annotation timeout.amphitheatre.app/owner) whose
	// objects an owner's page lists.
	Owner string
	// Recipient is whom the message went to (an e-mail address, "#channel",
	// "webhook:<channel name>").
	Recipient string
	// Actions always includes View (Sign adds it).
	Actions []Action
	// Expires is in whole seconds; never later than the object's deletion
	// time (the signer's duty).
	Expires time.Time
}

// Allows reports whether the claims allow the action.
func (c Claims) Allows(a Action) bool {
	return a == View || slices.Contains(c.Actions, a)
}

// The errors Verify returns; test them with errors.Is. None of them, and no
// error of this package, contains a token.
var (
	ErrMalformed    = errors.New("the link is damaged or incomplete")
	ErrBadSignature = errors.New("the link's signature does not match")
	ErrUnknownKey   = errors.New("the link was signed by a key that is no longer kept")
	ErrExpired      = errors.New("the link has expired")
)

// SecretName is the name of the Secret that holds the keyring, in the
// controller's namespace. Each data entry named "key-<UTC yyyymmddThhmmssZ>"
// is a key of 32 random bytes or more; the greatest name is the newest.
const SecretName = "timeout-controller-links"

const (
	keyPrefix = "key-"
	keyStamp  = "20060102T150405Z"
	// KeySize is the size of a fresh key and the least a key may have.
	KeySize = 32
	// macSize: HMAC-SHA256 truncated to 128 bits (RFC 2104 allows
	// truncation to half the hash), which keeps links short.
	macSize = 16
	// maxTokenLen bounds what Verify reads at all, and maxPayload what
	// the payload may inflate to.
	maxTokenLen = 2048
	maxPayload  = 4096
)

// Keyring holds the keys links are signed with: the newest key signs, every
// listed key verifies, and removing a key kills its links.
type Keyring struct {
	keys   map[string][]byte // by the key's stamp (its name without "key-")
	newest string
}

// KeyringFromSecret reads the keyring from its Secret. Entries not named
// "key-…" are ignored. It fails when no usable key is left, or when a key is
// shorter than KeySize bytes or misnamed (the error names the entry, never
// its bytes).
func KeyringFromSecret(s *corev1.Secret) (*Keyring, error) {
	if s == nil {
		return nil, errors.New("no links keyring Secret")
	}
	k := &Keyring{keys: map[string][]byte{}}
	for name, b := range s.Data {
		if !strings.HasPrefix(name, keyPrefix) {
			continue
		}
		stamp := strings.TrimPrefix(name, keyPrefix)
		if _, err := time.Parse(keyStamp, stamp); err != nil {
			return nil, fmt.Errorf("secret %s/%s: entry %q is not named key-<UTC yyyymmddThhmmssZ>", s.Namespace, s.Name, name)
		}
		if len(b) < KeySize {
			return nil, fmt.Errorf("secret %s/%s: entry %q holds %d bytes, a key needs at least %d", s.Namespace, s.Name, name, len(b), KeySize)
		}
		k.keys[stamp] = bytes.Clone(b)
		if stamp > k.newest {
			k.newest = stamp
		}
	}
	if len(k.keys) == 0 {
		return nil, fmt.Errorf("secret %s/%s holds no key (an entry named key-<UTC yyyymmddThhmmssZ> of %d random bytes)", s.Namespace, s.Name, KeySize)
	}
	return k, nil
}

// NewKeyringSecret returns the keyring Secret with one fresh key named after
// now.
func NewKeyringSecret(namespace string, now time.Time) (*corev1.Secret, error) {
	s := &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: SecretName},
		Type:       corev1.SecretTypeOpaque,
	}
	if err := AddKey(s, now); err != nil {
		return nil, err
	}
	return s, nil
}

// AddKey adds a fresh key named after now to the keyring Secret; it becomes
// the signing key. The older keys stay, so the links they signed still work
// until the keys are removed.
func AddKey(s *corev1.Secret, now time.Time) error {
	b := make([]byte, KeySize)
	if _, err := rand.Read(b); err != nil {
		return fmt.Errorf("new links key: %w", err)
	}
	name := KeyName(now)
	if _, ok := s.Data[name]; ok {
		return fmt.Errorf("secret %s/%s already holds an entry %q", s.Namespace, s.Name, name)
	}
	if s.Data == nil {
		s.Data = map[string][]byte{}
	}
	s.Data[name] = b
	return nil
}

// KeyName is the Secret entry name of a key made at t.
func KeyName(t time.Time) string { return keyPrefix + t.UTC().Format(keyStamp) }

// Keys lists the entry names of the keyring's keys, oldest first.
func (k *Keyring) Keys() []string {
	names := make([]string, 0, len(k.keys))
	for s := range k.keys {
		names = append(names, keyPrefix+s)
	}
	sort.Strings(names)
	return names
}

// NewID returns a fresh token id: 16 random hex characters.
func NewID() string {
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Sprintf("crypto/rand: %v", err)) // never fails on supported platforms
	}
	return hex.EncodeToString(b)
}

// wire is the token's payload: short field names to keep links short. Go's
// JSON matches names without regard to case, so no two differ only by case.
type wire struct {
	Key       string `json:"k"`
	ID        string `json:"i"`
	Group     string `json:"g,omitempty"`
	Version   string `json:"v,omitempty"`
	Kind      string `json:"t,omitempty"`
	Namespace string `json:"s,omitempty"`
	Name      string `json:"n,omitempty"`
	UID       string `json:"u,omitempty"`
	Owner     string `json:"o,omitempty"`
	Recipient string `json:"r,omitempty"`
	Actions   string `json:"a"` // one letter per action
	Expires   int64  `json:"e"`
}

var actionLetters = map[Action]byte{View: 'v', Extend: 'x', Wake: 'w', Delete: 'd'}

// Sign returns the token for the claims, signed with the newest key. An
// empty ID is filled with NewID; View is always allowed.
func (k *Keyring) Sign(c Claims) (string, error) {
	if k == nil || k.newest == "" {
		return "", errors.New("sign link: no key")
	}
	if (c.Object == nil) == (c.Owner == "") {
		return "", errors.New("sign link: exactly one of an object and an owner is needed")
	}
	if c.Expires.IsZero() {
		return "", errors.New("sign link: no expiry")
	}
	if c.ID == "" {
		c.ID = NewID()
	}
	letters := []byte{'v'}
	for _, a := range c.Actions {
		l, ok := actionLetters[a]
		if !ok {
			return "", fmt.Errorf("sign link: unknown action %q", a)
		}
		if !bytes.ContainsRune(letters, rune(l)) {
			letters = append(letters, l)
		}
	}
	w := wire{
		Key: k.newest, ID: c.ID, Owner: c.Owner, Recipient: c.Recipient,
		Actions: string(letters), Expires: c.Expires.Unix(),
	}
	if o := c.Object; o != nil {
		if o.Name == "" || o.UID == "" || o.Kind == "" || o.Version == "" {
			return "", errors.New("sign link: the object needs a version, kind, name and UID")
		}
		w.Group, w.Version, w.Kind, w.Namespace, w.Name, w.UID = o.Group, o.Version, o.Kind, o.Namespace, o.Name, string(o.UID)
	}
	raw, err := json.Marshal(w)
	if err != nil {
		return "", fmt.Errorf("sign link: %w", err)
	}
	var z bytes.Buffer
	fw, err := flate.NewWriter(&z, flate.BestCompression)
	if err != nil {
		return "", fmt.Errorf("sign link: %w", err)
	}
	if _, err := fw.Write(raw); err != nil {
		return "", fmt.Errorf("sign link: %w", err)
	}
	if err := fw.Close(); err != nil {
		return "", fmt.Errorf("sign link: %w", err)
	}
	payload := base64.RawURLEncoding.EncodeToString(z.Bytes())
	return payload + "." + base64.RawURLEncoding.EncodeToString(mac(k.keys[k.newest], payload)), nil
}

func mac(key []byte, payload string) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(payload))
	return h.Sum(nil)[:macSize]
}

// Verify reads a token. It returns ErrMalformed, ErrBadSignature,
// ErrUnknownKey or ErrExpired (test with errors.Is); with ErrExpired it also
// returns the claims, which are genuine but no longer valid.
func (k *Keyring) Verify(token string, now time.Time) (Claims, error) {
	c, _, err := k.verify(token, now)
	return c, err
}

// verify is Verify, and also returns the stamp of the key that signed the
// token.
func (k *Keyring) verify(token string, now time.Time) (Claims, string, error) {
	if k == nil || len(k.keys) == 0 {
		return Claims{}, "", errors.New("verify link: no key")
	}
	if len(token) > maxTokenLen {
		return Claims{}, "", ErrMalformed
	}
	payload, sig, ok := strings.Cut(token, ".")
	if !ok || payload == "" || sig == "" {
		return Claims{}, "", ErrMalformed
	}
	gotMAC, err := base64.RawURLEncoding.Strict().DecodeString(sig)
	if err != nil || len(gotMAC) != macSize {
		return Claims{}, "", ErrMalformed
	}
	z, err := base64.RawURLEncoding.Strict().DecodeString(payload)
	if err != nil {
		return Claims{}, "", ErrMalformed
	}
	// The key's name is inside the payload, so it is read before the
	// signature is checked; the inflated size is bounded.
	raw, err := io.ReadAll(io.LimitReader(flate.NewReader(bytes.NewReader(z)), maxPayload+1))
	if err != nil || len(raw) > maxPayload {
		return Claims{}, "", ErrMalformed
	}
	var w wire
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&w); err != nil || dec.More() {
		return Claims{}, "", ErrMalformed
	}
	key, ok := k.keys[w.Key]
	if !ok {
		return Claims{}, "", ErrUnknownKey
	}
	if subtle.ConstantTimeCompare(gotMAC, mac(key, payload)) != 1 {
		return Claims{}, "", ErrBadSignature
	}
	c, err := w.claims()
	if err != nil {
		return Claims{}, "", err
	}
	if !now.Before(c.Expires) {
		return c, w.Key, ErrExpired
	}
	return c, w.Key, nil
}

// formToken is the form token of the pages of a token signed with the key
// stamp: a POST must carry it, so that only who has seen the page (and so
// holds the token) can post, never a form on another site.
func (k *Keyring) formToken(stamp, id string) string {
	h := hmac.New(sha256.New, k.keys[stamp])
	h.Write([]byte("form\x00" + id))
	return base64.RawURLEncoding.EncodeToString(h.Sum(nil)[:macSize])
}

// checkFormToken reports, in constant time, whether got is the form token
// for a token signed with the key stamp.
func (k *Keyring) checkFormToken(stamp, id, got string) bool {
	return subtle.ConstantTimeCompare([]byte(k.formToken(stamp, id)), []byte(got)) == 1
}

func (w wire) claims() (Claims, error) {
	c := Claims{ID: w.ID, Owner: w.Owner, Recipient: w.Recipient, Expires: time.Unix(w.Expires, 0).UTC()}
	if w.Name != "" || w.UID != "" {
		c.Object = &Ref{Group: w.Group, Version: w.Version, Kind: w.Kind, Namespace: w.Namespace, Name: w.Name, UID: types.UID(w.UID)}
	}
	if (c.Object == nil) == (c.Owner == "") || len(w.ID) != 16 || w.Expires <= 0 {
		return Claims{}, ErrMalformed
	}
	for i := 0; i < len(w.Actions); i++ {
		var a Action
		for act, l := range actionLetters {
			if l == w.Actions[i] {
				a = act
			}
		}
		if a == "" || slices.Contains(c.Actions, a) {
			return Claims{}, ErrMalformed
		}
		c.Actions = append(c.Actions, a)
	}
	if !slices.Contains(c.Actions, View) {
		return Claims{}, ErrMalformed
	}
	return c, nil
}

// Links are the URLs one message carries for one object and recipient.
type Links struct {
	Page   string `json:"page"`             // GET: the page; it shows the buttons for the allowed actions
	Extend string `json:"extend,omitempty"` // Page + "?do=extend": the page with that button first; GET never acts
	Wake   string `json:"wake,omitempty"`
	Delete string `json:"delete,omitempty"`
}

// Links signs the claims once and returns their URLs: <base>/a/<token> for
// an object's page, <base>/o/<token> for an owner's page (which carries only
// Page: its buttons are per object).
func (k *Keyring) Links(base *url.URL, c Claims) (Links, error) {
	if base == nil {
		return Links{}, errors.New("links: no base URL")
	}
	tok, err := k.Sign(c)
	if err != nil {
		return Links{}, err
	}
	if c.Object == nil {
		return Links{Page: base.JoinPath("o", tok).String()}, nil
	}
	page := base.JoinPath("a", tok).String()
	l := Links{Page: page}
	if c.Allows(Extend) {
		l.Extend = page + "?do=extend"
	}
	if c.Allows(Wake) {
		l.Wake = page + "?do=wake"
	}
	if c.Allows(Delete) {
		l.Delete = page + "?do=delete"
	}
	return l, nil
}
