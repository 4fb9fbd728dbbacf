package actions

import (
	"bytes"
	"encoding/base64"
	"errors"
	"math/rand/v2"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

var t0 = time.Date(2026, 11, 28, 7, 0, 0, 0, time.UTC)

// testSecret holds keys made at the given times, each filled with one byte
// so that tests are repeatable.
func testSecret(at ...time.Time) *corev1.Secret {
	s := &corev1.Secret{Data: map[string][]byte{}}
	s.Namespace, s.Name = "timeout-system", SecretName
	for i, t := range at {
		s.Data[KeyName(t)] = bytes.Repeat([]byte{byte('a' + i)}, KeySize)
	}
	return s
}

func testKeyring(t testing.TB, at ...time.Time) *Keyring {
	t.Helper()
	k, err := KeyringFromSecret(testSecret(at...))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func objectClaims() Claims {
	return Claims{
		ID:        "0123456789abcdef",
		Object:    &Ref{Group: "amphitheatre.app", Version: "v1", Kind: "Playbook", Namespace: "team-a", Name: "pr-42", UID: "6f1c1d5e-8a55-4a4e-9d43-2a7f3f2f0b11"},
		Recipient: "alice@example.com",
		Actions:   []Action{View, Extend, Wake},
		Expires:   t0.Add(48 * time.Hour),
	}
}

func TestSignVerify(t *testing.T) {
	k := testKeyring(t, t0)
	for _, tc := range []struct {
		name string
		in   Claims
		want Claims
	}{
		{"an object's token reads back as signed", objectClaims(), objectClaims()},
		{"an owner's token reads back as signed",
			Claims{ID: "fedcba9876543210", Owner: "alice", Recipient: "alice@example.com", Actions: []Action{View, Extend}, Expires: t0.Add(time.Hour)},
			Claims{ID: "fedcba9876543210", Owner: "alice", Recipient: "alice@example.com", Actions: []Action{View, Extend}, Expires: t0.Add(time.Hour)}},
		{"view is added and sub-second expiry dropped",
			Claims{ID: "0000000000000001", Owner: "bob", Actions: []Action{Delete}, Expires: t0.Add(time.Hour + 300*time.Millisecond)},
			Claims{ID: "0000000000000001", Owner: "bob", Actions: []Action{View, Delete}, Expires: t0.Add(time.Hour)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tok, err := k.Sign(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			got, err := k.Verify(tok, t0)
			if err != nil {
				t.Fatalf("Verify: %v", err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestSignFillsAnID(t *testing.T) {
	k := testKeyring(t, t0)
	c := objectClaims()
	c.ID = ""
	tok, err := k.Sign(c)
	if err != nil {
		t.Fatal(err)
	}
	got, err := k.Verify(tok, t0)
	if err != nil || len(got.ID) != 16 {
		t.Fatalf("got id %q, err %v; want 16 hex characters", got.ID, err)
	}
}

func TestSignRefusesIncompleteClaims(t *testing.T) {
	k := testKeyring(t, t0)
	both := objectClaims()
	both.Owner = "alice"
	neither := objectClaims()
	neither.Object = nil
	noExpiry := objectClaims()
	noExpiry.Expires = time.Time{}
	noUID := objectClaims()
	noUID.Object = &Ref{Version: "v1", Kind: "Playbook", Name: "x"}
	unknown := objectClaims()
	unknown.Actions = []Action{"launch"}
	for name, c := range map[string]Claims{
		"both an object and an owner": both, "neither an object nor an owner": neither,
		"no expiry": noExpiry, "an object without a UID": noUID, "an unknown action": unknown,
	} {
		t.Run("refuses "+name, func(t *testing.T) {
			if _, err := k.Sign(c); err == nil {
				t.Error("signed")
			}
		})
	}
}

func TestVerifyRefusesBadTokens(t *testing.T) {
	k := testKeyring(t, t0)
	tok, err := k.Sign(objectClaims())
	if err != nil {
		t.Fatal(err)
	}
	payload, sig, _ := strings.Cut(tok, ".")
	flip := func(s string, i int) string {
		b := []byte(s)
		if b[i] == 'A' {
			b[i] = 'B'
		} else {
			b[i] = 'A'
		}
		return string(b)
	}
	// A payload signed right but naming a key the ring lacks.
	other := testKeyring(t, t0.Add(time.Hour))
	foreign, err := other.Sign(objectClaims())
	if err != nil {
		t.Fatal(err)
	}
	// A payload signed by another key of the same name.
	sameName := testSecret(t0)
	sameName.Data[KeyName(t0)] = bytes.Repeat([]byte{'z'}, KeySize)
	impostor, err := KeyringFromSecret(sameName)
	if err != nil {
		t.Fatal(err)
	}
	forged, err := impostor.Sign(objectClaims())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		token string
		want  error
	}{
		{"an empty token is malformed", "", ErrMalformed},
		{"a token without its signature is malformed", payload, ErrMalformed},
		{"a token without its payload is malformed", "." + sig, ErrMalformed},
		{"a truncated signature is malformed", payload + "." + sig[:len(sig)-2], ErrMalformed},
		{"a signature with a changed character is bad", payload + "." + flip(sig, 3), ErrBadSignature},
		{"a truncated payload is malformed", payload[:len(payload)/2] + "." + sig, ErrMalformed},
		{"a payload with a changed character is refused", flip(payload, len(payload)/2) + "." + sig, nil},
		{"a signature by another key of the same name is bad", forged, ErrBadSignature},
		{"a key the ring does not hold is unknown", foreign, ErrUnknownKey},
		{"a huge token is malformed", strings.Repeat("A", 5000) + "." + sig, ErrMalformed},
		{"text that is not base64 is malformed", "hello world.!!!", ErrMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := k.Verify(tc.token, t0)
			if err == nil {
				t.Fatal("accepted")
			}
			if tc.want != nil && !errors.Is(err, tc.want) {
				t.Errorf("got %v, want %v", err, tc.want)
			}
		})
	}
}

// A payload changed in any byte must fail, whatever the error.
func TestVerifyRefusesEveryChangedPayloadByte(t *testing.T) {
	k := testKeyring(t, t0)
	tok, err := k.Sign(objectClaims())
	if err != nil {
		t.Fatal(err)
	}
	payload, sig, _ := strings.Cut(tok, ".")
	z, _ := base64.RawURLEncoding.DecodeString(payload)
	for i := range z {
		for _, bit := range []byte{1, 0x80} {
			b := bytes.Clone(z)
			b[i] ^= bit
			if _, err := k.Verify(base64.RawURLEncoding.EncodeToString(b)+"."+sig, t0); err == nil {
				t.Fatalf("accepted a payload with byte %d changed", i)
			}
		}
	}
}

func TestVerifyExpiry(t *testing.T) {
	k := testKeyring(t, t0)
	c := objectClaims()
	tok, err := k.Sign(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		now  time.Time
		want error
	}{
		{"works a second before it expires", c.Expires.Add(-time.Second), nil},
		{"has expired at its expiry", c.Expires, ErrExpired},
		{"has expired after it", c.Expires.Add(time.Hour), ErrExpired},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := k.Verify(tok, tc.now)
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			if got.ID != c.ID {
				t.Errorf("claims not returned: %+v", got)
			}
		})
	}
}

func TestRotation(t *testing.T) {
	older := testKeyring(t, t0)
	oldTok, err := older.Sign(objectClaims())
	if err != nil {
		t.Fatal(err)
	}
	// A second key is added: it signs, the first still verifies.
	both := testKeyring(t, t0, t0.Add(24*time.Hour))
	newTok, err := both.Sign(objectClaims())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := both.Verify(oldTok, t0); err != nil {
		t.Errorf("the old key's link no longer works after a new key was added: %v", err)
	}
	if _, err := older.Verify(newTok, t0); !errors.Is(err, ErrUnknownKey) {
		t.Errorf("the new link was not signed with the newest key: %v", err)
	}
	// The first key is removed: its links die, the new key's live.
	s := testSecret(t0, t0.Add(24*time.Hour))
	delete(s.Data, KeyName(t0))
	newer, err := KeyringFromSecret(s)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := newer.Verify(oldTok, t0); !errors.Is(err, ErrUnknownKey) {
		t.Errorf("a removed key's link: got %v, want ErrUnknownKey", err)
	}
	if _, err := newer.Verify(newTok, t0); err != nil {
		t.Errorf("the newest key's link: %v", err)
	}
	if got, want := both.Keys(), []string{"key-20261128T070000Z", "key-20261129T070000Z"}; !reflect.DeepEqual(got, want) {
		t.Errorf("Keys() = %v, want %v", got, want)
	}
}

func TestKeyringFromSecret(t *testing.T) {
	secret := func(data map[string][]byte) *corev1.Secret {
		s := &corev1.Secret{Data: data}
		s.Namespace, s.Name = "timeout-system", SecretName
		return s
	}
	short := bytes.Repeat([]byte{'s'}, KeySize-1)
	for _, tc := range []struct {
		name    string
		secret  *corev1.Secret
		wantErr string
	}{
		{"refuses no Secret", nil, "no links keyring"},
		{"refuses a Secret without keys", secret(map[string][]byte{"README": []byte("x")}), "holds no key"},
		{"refuses a short key, naming the entry", secret(map[string][]byte{"key-20261128T070000Z": short}), `"key-20261128T070000Z" holds 31 bytes`},
		{"refuses a misnamed key", secret(map[string][]byte{"key-yesterday": bytes.Repeat([]byte{'k'}, KeySize)}), `"key-yesterday" is not named`},
		{"ignores other entries", secret(map[string][]byte{"notes": short, "key-20261128T070000Z": bytes.Repeat([]byte{'k'}, KeySize)}), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := KeyringFromSecret(tc.secret)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("got %v, want an error containing %q", err, tc.wantErr)
			}
			if strings.Contains(err.Error(), string(short)) {
				t.Error("the error shows the key's bytes")
			}
		})
	}
}

func TestNewKeyringSecret(t *testing.T) {
	s, err := NewKeyringSecret("timeout-system", t0)
	if err != nil {
		t.Fatal(err)
	}
	if s.Namespace != "timeout-system" || s.Name != SecretName || len(s.Data["key-20261128T070000Z"]) != KeySize {
		t.Fatalf("got %s/%s with %v", s.Namespace, s.Name, s.Data)
	}
	k, err := KeyringFromSecret(s)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.Sign(objectClaims()); err != nil {
		t.Fatal(err)
	}
	if err := AddKey(s, t0); err == nil {
		t.Error("AddKey replaced a key of the same name")
	}
	if err := AddKey(s, t0.Add(time.Second)); err != nil || len(s.Data) != 2 {
		t.Errorf("AddKey: %v, %d keys", err, len(s.Data))
	}
}

// randomName is a name of n characters as Kubernetes allows them, hard to
// compress: the worst case for a link's length.
func randomName(r *rand.Rand, n int) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, n)
	for i := range b {
		b[i] = alphabet[r.IntN(len(alphabet))]
	}
	return string(b)
}

func TestLinksAreShortForTheLongestNames(t *testing.T) {
	k := testKeyring(t, t0)
	base, _ := url.Parse("https://timeout.example.com")
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 50; i++ {
		c := objectClaims()
		c.ID = ""
		c.Object.Name = randomName(r, 253)
		c.Object.Namespace = randomName(r, 63)
		c.Recipient = randomName(r, 40) + "@example.com"
		c.Actions = []Action{View, Extend, Wake, Delete}
		tok, err := k.Sign(c)
		if err != nil {
			t.Fatal(err)
		}
		if len(tok) >= 600 {
			t.Fatalf("a token for a 253-character name is %d characters long, want < 600", len(tok))
		}
		l, err := k.Links(base, c)
		if err != nil {
			t.Fatal(err)
		}
		if len(l.Delete) > 700 {
			t.Fatalf("a link is %d characters long", len(l.Delete))
		}
		if i == 0 {
			t.Logf("token %d characters, links %d", len(tok), len(l.Delete))
		}
	}
}

func TestLinks(t *testing.T) {
	k := testKeyring(t, t0)
	base, _ := url.Parse("https://timeout.example.com/actions/")
	l, err := k.Links(base, objectClaims())
	if err != nil {
		t.Fatal(err)
	}
	tok := strings.TrimPrefix(l.Page, "https://timeout.example.com/actions/a/")
	if tok == l.Page {
		t.Fatalf("page %q is not under <base>/a/", l.Page)
	}
	if _, err := k.Verify(tok, t0); err != nil {
		t.Fatalf("the page's token: %v", err)
	}
	want := Links{Page: l.Page, Extend: l.Page + "?do=extend", Wake: l.Page + "?do=wake"}
	if l != want {
		t.Errorf("got %+v, want %+v", l, want)
	}
	owner, err := k.Links(base, Claims{Owner: "alice", Actions: []Action{Extend}, Expires: t0.Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(owner.Page, "https://timeout.example.com/actions/o/") || owner.Extend != "" {
		t.Errorf("owner's links: %+v", owner)
	}
}

// No error of Verify shows the token or a part of it.
func TestErrorsNeverContainTheToken(t *testing.T) {
	k := testKeyring(t, t0)
	tok, err := k.Sign(objectClaims())
	if err != nil {
		t.Fatal(err)
	}
	payload, sig, _ := strings.Cut(tok, ".")
	for _, bad := range []string{tok, payload + "." + sig[:10], payload[:20] + "." + sig, tok + "x", strings.ToUpper(tok)} {
		for _, now := range []time.Time{t0, t0.Add(72 * time.Hour)} {
			_, err := k.Verify(bad, now)
			if err == nil {
				continue
			}
			for _, part := range []string{payload[:12], sig[:12], bad} {
				if strings.Contains(err.Error(), part) {
					t.Errorf("error %q contains a part of the token", err)
				}
			}
		}
	}
}

func FuzzVerify(f *testing.F) {
	k := testKeyring(f, t0)
	tok, err := k.Sign(objectClaims())
	if err != nil {
		f.Fatal(err)
	}
	f.Add(tok)
	f.Add("")
	f.Add(".")
	f.Add("eyJrIjoiIn0.AAAAAAAAAAAAAAAAAAAAAA")
	f.Fuzz(func(t *testing.T, token string) {
		c, err := k.Verify(token, t0)
		if err != nil {
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrBadSignature) && !errors.Is(err, ErrUnknownKey) && !errors.Is(err, ErrExpired) {
				t.Fatalf("an error that is not one of the four: %v", err)
			}
			if len(token) > 8 && strings.Contains(err.Error(), token) {
				t.Fatalf("the error contains the token")
			}
			return
		}
		// Anything accepted is a valid claim set that signs again.
		if (c.Object == nil) == (c.Owner == "") || !c.Allows(View) || len(c.ID) != 16 {
			t.Fatalf("accepted invalid claims %+v", c)
		}
		again, err := k.Sign(c)
		if err != nil {
			t.Fatalf("accepted claims do not sign again: %v", err)
		}
		if c2, err := k.Verify(again, t0); err != nil || !reflect.DeepEqual(c, c2) {
			t.Fatalf("re-signed claims differ: %+v, %v", c2, err)
		}
	})
}
