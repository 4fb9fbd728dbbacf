// Copyright 2026 The Amphitheatre Authors.
// SPDX-License-Identifier: Apache-2.0

// Package cluster starts a one-node Kubernetes cluster on this machine from
// binaries built from source (hack/control-plane.sh --node): etcd,
// kube-apiserver, kube-controller-manager, kube-scheduler, kubelet and
// kube-proxy, with Debian's containerd, runc and CNI plugins. `make cluster`
// and the e2e suite run on it.
//
// Everything stays on this machine. The Pods' network is a bridge that
// Start creates (tc0, 10.88.0.0/16); the API server listens on the bridge's
// address, 10.88.0.1, which is also the node's address and where Pods reach
// receivers that a test runs on the host. No image is pulled: the sandbox
// image and every other image are built locally and imported (ImportImage).
//
// It needs root, cgroups, containerd, runc, the CNI plugins and iptables;
// Preflight says which one is missing. One cluster runs at a time.
package cluster

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/amphitheatre-app/timeout-controller/internal/testenv/image"
)

// The cluster's network. Pods get addresses from PodCIDR on the bridge
// Bridge, whose own address, HostIP, is the node's and the API server's.
const (
	Bridge      = "tc0"
	PodCIDR     = "10.88.0.0/16"
	HostIP      = "10.88.0.1"
	ServiceCIDR = "10.0.0.0/16"
	// NodeName is the one node's name.
	NodeName = "node-1"
	// SandboxImage is the image containerd starts every Pod's sandbox
	// from (built by Start from ./pause), under the name of the pause image
	// Kubernetes uses, so that workloads naming it run too.
	SandboxImage = "registry.k8s.io/pause:3.10"
)

// Options say where the cluster's parts come from.
type Options struct {
	// Root is the repository: Start builds the sandbox image from
	// internal/testenv/cluster/pause in it.
	Root string
	// Assets is the directory hack/control-plane.sh --node prints.
	Assets string
	// Dir holds the cluster's state, certificates and logs; a new
	// temporary directory when empty. Stop removes it but for its logs
	// when KeepLogs is set.
	Dir      string
	KeepLogs bool
	// Progress receives a line per step; discarded when nil.
	Progress io.Writer
}

// Cluster is a running one-node cluster.
type Cluster struct {
	// Dir holds its state; Dir/logs has a log per process.
	Dir string
	// Kubeconfig is the path of an administrator's kubeconfig.
	Kubeconfig string
	// Config is the same administrator's client configuration.
	Config *rest.Config
	// CA is the cluster CA, PEM encoded.
	CA []byte

	opts    Options
	socket  string
	procs   []*process
	lock    *os.File
	netns   map[string]bool
	started bool
	pki     *pki
	assets  string
	etcdURL string
}

// tools are what Start runs from the machine, and where Debian has them.
var tools = []struct{ name, pkg string }{
	{"containerd", "containerd"},
	{"containerd-shim-runc-v2", "containerd"},
	{"ctr", "containerd"},
	{"runc", "runc"},
	{"iptables", "iptables"},
	{"iptables-restore", "iptables"},
	{"conntrack", "conntrack"},
	{"ip", "iproute2"},
}

// cniDir is where Debian's containernetworking-plugins installs them.
const cniDir = "/usr/lib/cni"

// Preflight says what this machine lacks to run a cluster, in a sentence
// that names the missing part and how to get it; nil when nothing is
// missing.
func Preflight(assets string) error {
	var missing []string
	if os.Geteuid() != 0 {
		missing = append(missing, "root: kubelet, containerd and the bridge need it (run as root)")
	}
	for _, t := range tools {
		if _, err := exec.LookPath(t.name); err != nil {
			missing = append(missing, fmt.Sprintf("%s: apt-get install %s", t.name, t.pkg))
		}
	}
	for _, p := range []string{"bridge", "host-local", "loopback"} {
		if _, err := os.Stat(filepath.Join(cniDir, p)); err != nil {
			missing = append(missing, fmt.Sprintf("the CNI plugin %s in %s: apt-get install containernetworking-plugins", p, cniDir))
		}
	}
	for _, b := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet", "kube-proxy"} {
		if _, err := os.Stat(filepath.Join(assets, b)); err != nil {
			missing = append(missing, fmt.Sprintf("%s in %q: hack/control-plane.sh --node builds it", b, assets))
		}
	}
	if _, err := os.Stat("/sys/fs/cgroup"); err != nil {
		missing = append(missing, "cgroups: /sys/fs/cgroup is not mounted")
	}
	if fs, err := os.ReadFile("/proc/filesystems"); err == nil && !bytes.Contains(fs, []byte("overlay")) {
		missing = append(missing, "the overlay filesystem: containerd's overlayfs snapshotter needs it (modprobe overlay)")
	}
	if len(missing) == 0 {
		return nil
	}
	return fmt.Errorf("this machine cannot run the one-node cluster; missing:\n  %s", strings.Join(missing, "\n  "))
}

// Start starts the cluster and returns once its node is Ready. Stop it
// with Stop, also when Start fails.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	if err := Preflight(opts.Assets); err != nil {
		return nil, err
	}
	if opts.Progress == nil {
		opts.Progress = io.Discard
	}
	c := &Cluster{opts: opts, assets: opts.Assets, Dir: opts.Dir}
	lock, err := takeLock()
	if err != nil {
		return nil, err
	}
	c.lock = lock
	if c.Dir == "" {
		if c.Dir, err = os.MkdirTemp("", "timeout-cluster-"); err != nil {
			return c, err
		}
	}
	for _, d := range []string{"logs", "cni", "kubelet", "containerd"} {
		if err := os.MkdirAll(filepath.Join(c.Dir, d), 0o755); err != nil {
			return c, err
		}
	}
	c.socket = filepath.Join(c.Dir, "containerd.sock")
	c.netns = listNetns()
	c.started = true

	steps := []struct {
		what string
		run  func(context.Context) error
	}{
		{"network: bridge " + Bridge + " at " + HostIP, c.startNetwork},
		{"certificates", c.writeCertificates},
		{"etcd", c.startEtcd},
		{"kube-apiserver", c.startAPIServer},
		{"kube-controller-manager and kube-scheduler", c.startControllers},
		{"containerd and the sandbox image", c.startContainerd},
		{"kubelet and kube-proxy", c.startNode},
		{"node " + NodeName + " Ready", c.waitNodeReady},
	}
	for _, s := range steps {
		fmt.Fprintf(opts.Progress, "cluster: %s\n", s.what)
		if err := s.run(ctx); err != nil {
			return c, fmt.Errorf("start %s: %w", s.what, err)
		}
	}
	return c, nil
}

// takeLock makes sure one cluster runs at a time: they would share the
// bridge, the iptables rules and the node's name.
func takeLock() (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(os.TempDir(), "timeout-cluster.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		return nil, errors.New("another one-node cluster runs on this machine (make cluster or make e2e); stop it first")
	}
	return f, nil
}

func (c *Cluster) path(elem ...string) string {
	return filepath.Join(append([]string{c.Dir}, elem...)...)
}

// startNetwork creates the bridge the CNI bridge plugin attaches Pods to,
// with the host's address on it, so that the API server can listen there
// before the first Pod exists.
func (c *Cluster) startNetwork(ctx context.Context) error {
	if _, err := net.InterfaceByName(Bridge); err != nil {
		if err := run(ctx, "ip", "link", "add", Bridge, "type", "bridge"); err != nil {
			return err
		}
	}
	if err := run(ctx, "ip", "addr", "replace", HostIP+"/16", "dev", Bridge); err != nil {
		return err
	}
	if err := run(ctx, "ip", "link", "set", Bridge, "up"); err != nil {
		return err
	}
	conf := fmt.Sprintf(`{
  "cniVersion": "0.4.0",
  "name": "timeout-cluster",
  "plugins": [
    {
      "type": "bridge",
      "bridge": %q,
      "isGateway": true,
      "isDefaultGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "dataDir": %q,
        "ranges": [[{"subnet": %q, "gateway": %q}]]
      }
    }
  ]
}
`, Bridge, c.path("cni", "ipam"), PodCIDR, HostIP)
	return os.WriteFile(c.path("cni", "10-timeout-cluster.conflist"), []byte(conf), 0o644)
}

func (c *Cluster) writeCertificates(context.Context) error {
	p, err := newPKI(c.path("pki"))
	if err != nil {
		return err
	}
	c.pki, c.CA = p, p.caPEM()
	if err := p.issue("apiserver", "kube-apiserver", nil,
		HostIP, "127.0.0.1", "10.0.0.1", "localhost",
		"kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"); err != nil {
		return err
	}
	if err := p.issue("apiserver-kubelet-client", "kube-apiserver-kubelet-client", []string{"system:masters"}); err != nil {
		return err
	}
	if _, _, err := p.serviceAccountKey(); err != nil {
		return err
	}
	for _, u := range []struct{ name, user, group string }{
		{"admin", "kubernetes-admin", "system:masters"},
		{"kube-controller-manager", "system:kube-controller-manager", ""},
		{"kube-scheduler", "system:kube-scheduler", ""},
		{"kubelet", "system:node:" + NodeName, "system:nodes"},
		{"kube-proxy", "system:kube-proxy", ""},
	} {
		var groups []string
		if u.group != "" {
			groups = []string{u.group}
		}
		if err := p.issue(u.name, u.user, groups); err != nil {
			return err
		}
	}
	return nil
}

// kubeconfig writes the kubeconfig of the user whose certificate is
// pki/name.crt and returns its path.
func (c *Cluster) kubeconfig(name, server string) (string, error) {
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: timeout-cluster
  cluster:
    server: %s
    certificate-authority: %s
users:
- name: %s
  user:
    client-certificate: %s
    client-key: %s
contexts:
- name: timeout-cluster
  context:
    cluster: timeout-cluster
    user: %s
current-context: timeout-cluster
`, server, c.pki.caFile(), name, c.path("pki", name+".crt"), c.path("pki", name+".key"), name)
	file := c.path(name + ".kubeconfig")
	return file, os.WriteFile(file, []byte(cfg), 0o600)
}

func (c *Cluster) startEtcd(ctx context.Context) error {
	client, peer := freePort("127.0.0.1"), freePort("127.0.0.1")
	if client == 0 || peer == 0 {
		return errors.New("no free port on 127.0.0.1")
	}
	url := "http://127.0.0.1:" + strconv.Itoa(client)
	if err := c.start(ctx, "etcd", filepath.Join(c.assets, "etcd"),
		"--data-dir="+c.path("etcd"),
		"--listen-client-urls="+url, "--advertise-client-urls="+url,
		"--listen-peer-urls=http://127.0.0.1:"+strconv.Itoa(peer),
		"--initial-advertise-peer-urls=http://127.0.0.1:"+strconv.Itoa(peer),
		"--initial-cluster=default=http://127.0.0.1:"+strconv.Itoa(peer),
		"--unsafe-no-fsync",
	); err != nil {
		return err
	}
	c.etcdURL = url
	return c.waitHTTP(ctx, "etcd", url+"/health", nil)
}

func (c *Cluster) startAPIServer(ctx context.Context) error {
	port := freePort(HostIP)
	if port == 0 {
		return errors.New("no free port on " + HostIP)
	}
	server := fmt.Sprintf("https://%s:%d", HostIP, port)
	pk := func(name string) string { return c.path("pki", name) }
	if err := c.start(ctx, "kube-apiserver", filepath.Join(c.assets, "kube-apiserver"),
		"--etcd-servers="+c.etcdURL,
		"--bind-address="+HostIP, "--advertise-address="+HostIP,
		"--secure-port="+strconv.Itoa(port),
		"--tls-cert-file="+pk("apiserver.crt"), "--tls-private-key-file="+pk("apiserver.key"),
		"--client-ca-file="+pk("ca.crt"),
		"--kubelet-client-certificate="+pk("apiserver-kubelet-client.crt"),
		"--kubelet-client-key="+pk("apiserver-kubelet-client.key"),
		"--kubelet-preferred-address-types=InternalIP",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file="+pk("sa.pub"),
		"--service-account-signing-key-file="+pk("sa.key"),
		"--service-cluster-ip-range="+ServiceCIDR,
		"--authorization-mode=Node,RBAC",
		"--allow-privileged=true",
		"--profiling=false",
	); err != nil {
		return err
	}
	admin, err := c.kubeconfig("admin", server)
	if err != nil {
		return err
	}
	c.Kubeconfig = admin
	if c.Config, err = clientcmd.BuildConfigFromFlags("", admin); err != nil {
		return err
	}
	c.Config.QPS, c.Config.Burst = 100, 200
	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		return err
	}
	return c.poll(ctx, "kube-apiserver", 2*time.Minute, func(ctx context.Context) error {
		body, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if err != nil {
			return fmt.Errorf("%w: %s", err, body)
		}
		return nil
	})
}

func (c *Cluster) startControllers(ctx context.Context) error {
	server := "https://" + HostIP + ":" + c.apiPort()
	kcm, err := c.kubeconfig("kube-controller-manager", server)
	if err != nil {
		return err
	}
	sched, err := c.kubeconfig("kube-scheduler", server)
	if err != nil {
		return err
	}
	kcmPort, schedPort := freePort("127.0.0.1"), freePort("127.0.0.1")
	if err := c.start(ctx, "kube-controller-manager", filepath.Join(c.assets, "kube-controller-manager"),
		"--kubeconfig="+kcm, "--authentication-kubeconfig="+kcm, "--authorization-kubeconfig="+kcm,
		"--bind-address=127.0.0.1", "--secure-port="+strconv.Itoa(kcmPort),
		"--cert-dir="+c.path("kube-controller-manager"),
		"--leader-elect=false",
		"--use-service-account-credentials=true",
		"--service-account-private-key-file="+c.path("pki", "sa.key"),
		"--root-ca-file="+c.pki.caFile(),
		"--cluster-signing-cert-file="+c.pki.caFile(),
		"--cluster-signing-key-file="+c.path("pki", "ca.key"),
		"--service-cluster-ip-range="+ServiceCIDR,
		"--profiling=false",
	); err != nil {
		return err
	}
	if err := c.start(ctx, "kube-scheduler", filepath.Join(c.assets, "kube-scheduler"),
		"--kubeconfig="+sched, "--authentication-kubeconfig="+sched, "--authorization-kubeconfig="+sched,
		"--bind-address=127.0.0.1", "--secure-port="+strconv.Itoa(schedPort),
		"--leader-elect=false",
		"--profiling=false",
	); err != nil {
		return err
	}
	insecure := &http.Client{Timeout: time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // loopback health checks of processes this package started
	if err := c.waitHTTP(ctx, "kube-controller-manager", "https://127.0.0.1:"+strconv.Itoa(kcmPort)+"/healthz", insecure); err != nil {
		return err
	}
	return c.waitHTTP(ctx, "kube-scheduler", "https://127.0.0.1:"+strconv.Itoa(schedPort)+"/healthz", insecure)
}

func (c *Cluster) startContainerd(ctx context.Context) error {
	cfg := fmt.Sprintf(`version = 2
root = %q
state = %q
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]

[grpc]
  address = %q

[ttrpc]
  address = %q

[plugins."io.containerd.internal.v1.opt"]
  path = %q

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %q
  # The sandbox lacks CAP_SYS_RESOURCE: without this runc fails to raise
  # a container's oom_score_adj.
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %q
    conf_dir = %q
`, c.path("containerd", "root"), c.path("containerd", "state"), c.socket, c.socket+".ttrpc",
		c.path("containerd", "opt"), SandboxImage, cniDir, c.path("cni"))
	conf := c.path("containerd", "config.toml")
	if err := os.WriteFile(conf, []byte(cfg), 0o644); err != nil {
		return err
	}
	if err := c.start(ctx, "containerd", "containerd", "--config="+conf); err != nil {
		return err
	}
	if err := c.poll(ctx, "containerd", time.Minute, func(ctx context.Context) error {
		return run(ctx, "ctr", "--address="+c.socket, "version")
	}); err != nil {
		return err
	}
	tarball := c.path("pause.tar")
	if err := BuildPause(ctx, c.opts.Root, tarball); err != nil {
		return err
	}
	return c.ImportImage(ctx, tarball)
}

// ImportImage imports a docker-archive or OCI tarball into the node's
// containerd, where the kubelet finds it.
func (c *Cluster) ImportImage(ctx context.Context, tarball string) error {
	return run(ctx, "ctr", "--address="+c.socket, "--namespace=k8s.io", "images", "import", "--no-unpack=false", tarball)
}

func (c *Cluster) startNode(ctx context.Context) error {
	server := "https://" + HostIP + ":" + c.apiPort()
	kubelet, err := c.kubeconfig("kubelet", server)
	if err != nil {
		return err
	}
	proxy, err := c.kubeconfig("kube-proxy", server)
	if err != nil {
		return err
	}
	kubeletPort, healthz := freePort(HostIP), freePort("127.0.0.1")
	cfg := fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: %s
port: %d
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: %d
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: %q}
authorization:
  mode: Webhook
containerRuntimeEndpoint: unix://%s
# This machine's kernel uses cgroup v1, without systemd.
failCgroupV1: false
cgroupDriver: cgroupfs
failSwapOn: false
resolvConf: /etc/resolv.conf
# A small disk must not evict the suite's Pods.
evictionHard:
  memory.available: "100Mi"
  nodefs.available: "1%%"
  imagefs.available: "1%%"
  nodefs.inodesFree: "1%%"
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
`, HostIP, kubeletPort, healthz, c.pki.caFile(), c.socket)
	kubeletConf := c.path("kubelet", "config.yaml")
	if err := os.WriteFile(kubeletConf, []byte(cfg), 0o644); err != nil {
		return err
	}
	if err := c.start(ctx, "kubelet", filepath.Join(c.assets, "kubelet"),
		"--config="+kubeletConf,
		"--kubeconfig="+kubelet,
		"--root-dir="+c.path("kubelet", "root"),
		"--cert-dir="+c.path("kubelet", "pki"),
		"--hostname-override="+NodeName,
		"--node-ip="+HostIP,
	); err != nil {
		return err
	}
	proxyConf := c.path("kube-proxy.yaml")
	if err := os.WriteFile(proxyConf, fmt.Appendf(nil, `apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: %q
hostnameOverride: %s
mode: iptables
clusterCIDR: %s
healthzBindAddress: 127.0.0.1:%d
metricsBindAddress: 127.0.0.1:%d
# Leave the machine's conntrack settings alone.
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
iptables:
  localhostNodePorts: false
`, proxy, NodeName, PodCIDR, freePort("127.0.0.1"), freePort("127.0.0.1")), 0o644); err != nil {
		return err
	}
	return c.start(ctx, "kube-proxy", filepath.Join(c.assets, "kube-proxy"), "--config="+proxyConf)
}

func (c *Cluster) waitNodeReady(ctx context.Context) error {
	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		return err
	}
	return c.poll(ctx, "node "+NodeName, 3*time.Minute, func(ctx context.Context) error {
		n, err := cs.CoreV1().Nodes().Get(ctx, NodeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady {
				if cond.Status == corev1.ConditionTrue {
					return nil
				}
				return fmt.Errorf("not Ready: %s: %s", cond.Reason, cond.Message)
			}
		}
		return errors.New("no Ready condition yet")
	})
}

// poll calls check until it succeeds, the timeout passes, or a process
// of the cluster exits.
func (c *Cluster) poll(ctx context.Context, what string, timeout time.Duration, check func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last error
	err := wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		if err := c.exited(); err != nil {
			return false, err
		}
		last = check(ctx)
		return last == nil, nil
	})
	if err != nil && last != nil {
		return fmt.Errorf("%s: %w (last: %v)", what, err, last)
	}
	return err
}

func (c *Cluster) waitHTTP(ctx context.Context, what, url string, hc *http.Client) error {
	if hc == nil {
		hc = &http.Client{Timeout: time.Second}
	}
	return c.poll(ctx, what, time.Minute, func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s answered %s", url, resp.Status)
		}
		return nil
	})
}

func (c *Cluster) apiPort() string {
	u := c.Config.Host
	return u[strings.LastIndex(u, ":")+1:]
}

// freePort is a port free on addr just now, or 0.
func freePort(addr string) int {
	l, err := net.Listen("tcp", net.JoinHostPort(addr, "0"))
	if err != nil {
		return 0
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port
}

// run runs a command and returns its output in the error when it fails.
func run(ctx context.Context, name string, args ...string) error {
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

// BuildPause writes the sandbox image, SandboxImage, built from ./pause,
// to the file out.
func BuildPause(ctx context.Context, root, out string) error {
	return image.Pause(ctx, root, "./internal/testenv/cluster/pause", out, SandboxImage)
}
