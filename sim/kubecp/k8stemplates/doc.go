// This Source Code Form is subject to the terms of the Mozilla Public
// License, v. 2.0. If a copy of the MPL was not distributed with this
// file, You can obtain one at http://mozilla.org/MPL/2.0/.

// Package k8stemplates holds Talos v1.12.6's bootstrap manifests for
// kube-proxy and CoreDNS, copied unchanged from
// internal/app/machined/pkg/controllers/k8s/internal/k8stemplates
// (kube-proxy.go, coredns.go; MPL-2.0, as the headers say): that package is
// internal to the Talos module, which talchaos cannot import, and the
// simulated control plane applies exactly what Talos applies.
package k8stemplates
