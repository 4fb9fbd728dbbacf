// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package delivery

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/amphitheatre-app/timeout-controller/internal/notify"
)

// ownersTTL is how long the owner addresses are reused before the
// ConfigMap is read again: an edit is in force within a minute.
const ownersTTL = time.Minute

// Owners finds the e-mail address of an object's owner, through the
// administrator's ConfigMap in the controller's own namespace (policy
// authors cannot write there: it decides where mail goes).
type Owners struct {
	// Reader reads the ConfigMap from the API server: the controller
	// caches no ConfigMaps.
	Reader client.Reader
	// Namespace and Name locate the ConfigMap; no Name, no mapping.
	Namespace, Name string
	Clock           clock.PassiveClock

	mu   sync.Mutex
	read time.Time
	book notify.OwnerAddresses
	err  error
}

// Address returns the address owner's messages go to, or why there is
// none (notify.ErrOwnerSilenced when the mapping says nobody).
func (o *Owners) Address(ctx context.Context, owner string, allowedDomains []string) (string, error) {
	var book notify.OwnerAddresses
	var err error
	if o != nil {
		book, err = o.addresses(ctx)
	}
	address, aerr := notify.OwnerAddress(owner, book, allowedDomains)
	if aerr != nil && err != nil && !errors.Is(aerr, notify.ErrOwnerSilenced) {
		// The mapping could not be read: say so, since it may map owner.
		return "", fmt.Errorf("%w (%w)", aerr, err)
	}
	return address, aerr
}

// errOwnersUnread is a failed read of the ConfigMap.
var errOwnersUnread = errors.New("could not read the owner addresses")

// addresses returns the mapping, read again once ownersTTL passed.
func (o *Owners) addresses(ctx context.Context) (notify.OwnerAddresses, error) {
	if o.Name == "" {
		return nil, nil
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if now := o.Clock.Now(); o.read.IsZero() || now.Sub(o.read) >= ownersTTL {
		book, err := o.load(ctx)
		// An API server that fails a read keeps the mapping read before:
		// an owner is not left out of a reminder for a passing error.
		if !errors.Is(err, errOwnersUnread) || o.book == nil {
			o.book, o.err = book, err
		}
		o.read = now
	}
	return o.book, o.err
}

func (o *Owners) load(ctx context.Context) (notify.OwnerAddresses, error) {
	where := fmt.Sprintf("ConfigMap %s/%s", o.Namespace, o.Name)
	cm := &corev1.ConfigMap{}
	err := o.Reader.Get(ctx, client.ObjectKey{Namespace: o.Namespace, Name: o.Name}, cm)
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("the owner addresses %s do not exist", where)
	}
	if err != nil {
		return nil, fmt.Errorf("%w %s: %w", errOwnersUnread, where, err)
	}
	book, err := notify.ParseOwnerAddresses(cm.Data[notify.OwnerAddressesKey])
	if err != nil {
		return nil, fmt.Errorf("the owner addresses %s, key %s: %w", where, notify.OwnerAddressesKey, err)
	}
	return book, nil
}
