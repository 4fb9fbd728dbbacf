// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

package match

import (
	"time"

	corev1 "k8s.io/api/core/v1"
)

var t0 = time.Date(2026, time.March, 1, 9, 0, 0, 0, time.UTC)

var configMapGVK = corev1.SchemeGroupVersion.WithKind("ConfigMap")
