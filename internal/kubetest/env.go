package kubetest

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/goleak"
	"k8s.io/client-go/rest"
)

const (
	// defaultStartTimeout bounds Start when ctx has no deadline. A start takes about 5 s on an
	// idle machine; the margin is for two busy cores.
	defaultStartTimeout = 2 * time.Minute

	// adminUser is the static-token user in system:masters behind AdminConfig.
	adminUser = "kubetest-admin"

	// startAttempts covers the rare case that another process takes a chosen port first.
	startAttempts = 3
)

// Options configures Start.
type Options struct {
	// Users are extra static-token users. They get no RBAC bindings: tests grant what they need,
	// which keeps least-privilege checks meaningful.
	Users []User

	// Goleak adds options to TestMainWithEnv's check for leaked goroutines, for goroutines a
	// library is known to leave behind or to end late.
	Goleak []goleak.Option
	// Settle is how long the check waits for goroutines that end late (goleak's own retries
	// last about a second).
	Settle time.Duration

	// CRDs, when set, replaces the minimal Eno CRDs of crds/eno-crds.yaml with these
	// (multi-document YAML), for instance Eno's own CRDs from its source tree. They must include
	// compositions and resourceslices of eno.azure.io.
	CRDs []byte
}

// ControllerRuntimeStragglers are the goroutines controller-runtime's caches leave behind a
// stopped controller, for Options.Goleak with Settle of a minute: a namespaced cache stops its
// informers without waiting for them, and a reflector waiting out its backoff (an unreachable
// cluster) ends only when the backoff does. A metadata informer stopped with an event in flight
// leaves its GVK-fixing watch.Filter goroutine blocked for good, an upstream flaw: it is ignored.
var ControllerRuntimeStragglers = []goleak.Option{
	goleak.IgnoreAnyFunction("k8s.io/apimachinery/pkg/watch.(*filteredWatch).loop"),
}

// User is a static-token identity. Every user is also in system:authenticated.
type User struct {
	Name   string
	Groups []string
}

// Env is a running etcd and kube-apiserver pair. It is safe for concurrent use.
type Env struct {
	dir       string
	host      string // https://127.0.0.1:port
	caData    []byte // PEM of the API server's self-signed serving certificate chain
	admin     *credential
	users     map[string]*credential
	etcd      *process
	apiserver *process

	stopOnce sync.Once
	stopErr  error
}

// errPortTaken marks a start that failed because a chosen port was taken in the meantime.
var errPortTaken = errors.New("a chosen port was taken by another process")

// Start launches etcd and kube-apiserver on free 127.0.0.1 ports in a temp dir, waits for
// /readyz, installs the Eno CRDs, and returns the environment. A missing binary is an error
// telling the user to run `make testbin` (never a skip). The caller must call Stop.
func Start(ctx context.Context, opts Options) (*Env, error) {
	if err := validateOptions(opts); err != nil {
		return nil, err
	}
	bins, err := locateBinaries()
	if err != nil {
		return nil, err
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, defaultStartTimeout)
		defer cancel()
	}
	for attempt := 1; ; attempt++ {
		env, err := start(ctx, opts, bins)
		if err == nil {
			return env, nil
		}
		if attempt == startAttempts || !errors.Is(err, errPortTaken) || ctx.Err() != nil {
			return nil, err
		}
	}
}

func validateOptions(opts Options) error {
	seen := map[string]bool{adminUser: true}
	for _, u := range opts.Users {
		switch {
		case u.Name == "":
			return errors.New("kubetest: a user in Options.Users has an empty name")
		case u.Name == adminUser:
			return fmt.Errorf("kubetest: user name %q is reserved for the admin", adminUser)
		case seen[u.Name]:
			return fmt.Errorf("kubetest: user %q is declared twice in Options.Users", u.Name)
		case strings.ContainsAny(u.Name, "\r\n"):
			return fmt.Errorf("kubetest: user name %q contains a line break", u.Name)
		}
		seen[u.Name] = true
		if slices.Contains(u.Groups, "") || slices.ContainsFunc(u.Groups, func(g string) bool { return strings.ContainsAny(g, ",\r\n") }) {
			return fmt.Errorf("kubetest: user %q has an empty group or one containing a comma or line break", u.Name)
		}
	}
	return nil
}

// start makes one attempt; on failure it cleans up everything it created.
func start(ctx context.Context, opts Options, bins binaries) (_ *Env, err error) {
	dir, err := os.MkdirTemp("", "kubetest-")
	if err != nil {
		return nil, fmt.Errorf("kubetest: creating temp dir: %w", err)
	}
	e := &Env{dir: dir, users: make(map[string]*credential, len(opts.Users))}
	defer func() {
		if err != nil {
			err = e.withLogs(err)
			if stopErr := e.Stop(); stopErr != nil {
				err = fmt.Errorf("%w (cleaning up: %v)", err, stopErr)
			}
		}
	}()

	ports, err := FreePorts(3)
	if err != nil {
		return nil, fmt.Errorf("kubetest: %w", err)
	}
	securePort := ports[2]
	e.host = "https://127.0.0.1:" + strconv.Itoa(securePort)
	etcdClientURL, err := e.startEtcd(ctx, bins.etcd, dir, ports[0], ports[1])
	if err != nil {
		return nil, err
	}

	creds, err := e.makeCredentials(opts.Users)
	if err != nil {
		return nil, err
	}
	tokenFile := filepath.Join(dir, "tokens.csv")
	if err := writeTokenFile(tokenFile, creds); err != nil {
		return nil, fmt.Errorf("kubetest: %w", err)
	}
	saKey, saPub := filepath.Join(dir, "sa.key"), filepath.Join(dir, "sa.pub")
	if err := writeServiceAccountKeys(saKey, saPub); err != nil {
		return nil, fmt.Errorf("kubetest: %w", err)
	}
	certDir := filepath.Join(dir, "pki")

	e.apiserver, err = launch("kube-apiserver", bins.apiserver, apiserverArgs(apiserverConfig{
		etcdURL:    etcdClientURL,
		securePort: securePort,
		certDir:    certDir,
		tokenFile:  tokenFile,
		saKey:      saKey,
		saPub:      saPub,
	}), filepath.Join(dir, "kube-apiserver.log"))
	if err != nil {
		return nil, fmt.Errorf("kubetest: %w", err)
	}
	// The serving certificate is not known yet, so readiness is probed without verifying it;
	// every client handed out afterwards verifies it.
	insecure := &tls.Config{InsecureSkipVerify: true} //nolint:gosec // loopback probe, see above
	if err := waitHealthy(ctx, e.apiserver, e.host+"/readyz", e.admin.token, insecure); err != nil {
		return nil, err
	}
	e.caData, err = os.ReadFile(filepath.Join(certDir, "apiserver.crt"))
	if err != nil {
		return nil, fmt.Errorf("kubetest: reading the API server's serving certificate: %w", err)
	}

	if err := e.waitForNamespaces(ctx, "default", "kube-system"); err != nil {
		return nil, err
	}
	if err := e.installCRDs(ctx, opts.CRDs); err != nil {
		return nil, err
	}
	return e, nil
}

// startEtcd launches etcd on the two ports, in dir, and waits until it is healthy. It returns
// the URL clients reach it at.
func (e *Env) startEtcd(ctx context.Context, bin, dir string, clientPort, peerPort int) (string, error) {
	clientURL := "http://127.0.0.1:" + strconv.Itoa(clientPort)
	peerURL := "http://127.0.0.1:" + strconv.Itoa(peerPort)
	var err error
	e.etcd, err = launch("etcd", bin, []string{
		"--name=kubetest",
		"--data-dir=" + filepath.Join(dir, "etcd"),
		"--listen-client-urls=" + clientURL,
		"--advertise-client-urls=" + clientURL,
		"--listen-peer-urls=" + peerURL,
		"--initial-advertise-peer-urls=" + peerURL,
		"--initial-cluster=kubetest=" + peerURL,
		"--unsafe-no-fsync=true",
		"--log-level=warn",
	}, filepath.Join(dir, "etcd.log"))
	if err != nil {
		return "", fmt.Errorf("kubetest: %w", err)
	}
	if err := waitHealthy(ctx, e.etcd, clientURL+"/health", "", nil); err != nil {
		return "", err
	}
	return clientURL, nil
}

// makeCredentials creates the admin and the declared users, with fresh tokens.
func (e *Env) makeCredentials(users []User) ([]*credential, error) {
	all := append([]User{{Name: adminUser, Groups: []string{"system:masters"}}}, users...)
	creds := make([]*credential, 0, len(all))
	for i, u := range all {
		token, err := newToken()
		if err != nil {
			return nil, fmt.Errorf("kubetest: %w", err)
		}
		c := &credential{user: User{Name: u.Name, Groups: slices.Clone(u.Groups)}, token: token}
		if i == 0 {
			c.kubecf = "admin.kubeconfig"
			e.admin = c
		} else {
			c.kubecf = fmt.Sprintf("user-%d.kubeconfig", i)
			e.users[u.Name] = c
		}
		creds = append(creds, c)
	}
	return creds, nil
}

type apiserverConfig struct {
	etcdURL    string
	securePort int
	certDir    string
	tokenFile  string
	saKey      string
	saPub      string
}

// apiserverArgs are the kube-apiserver flags: everything on loopback, nothing that needs the
// network or other components.
func apiserverArgs(c apiserverConfig) []string {
	return []string{
		"--etcd-servers=" + c.etcdURL,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(c.securePort),
		"--cert-dir=" + c.certDir, // self-signed serving certificate generated here
		"--token-auth-file=" + c.tokenFile,
		"--authorization-mode=RBAC",
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file=" + c.saPub,
		"--service-account-signing-key-file=" + c.saKey,
		"--service-cluster-ip-range=10.0.0.0/24",
		// No endpoint reconciler: it would publish this server in the kubernetes Service and
		// keep a lease for it, which nothing here needs.
		"--endpoint-reconciler-type=none",
		// Priority and fairness adds controllers and config objects a single-client test
		// server does not need; plain in-flight limits remain.
		"--enable-priority-and-fairness=false",
		"--profiling=false",
	}
}

// waitHealthy polls url until it answers 200, the process exits, or ctx ends.
func waitHealthy(ctx context.Context, p *process, url, token string, tlsConfig *tls.Config) error {
	transport := &http.Transport{TLSClientConfig: tlsConfig, Proxy: nil}
	defer transport.CloseIdleConnections()
	client := &http.Client{Transport: transport, Timeout: 5 * time.Second}

	var last string
	for {
		if p.exited() {
			err := p.exitError()
			if p.logContains("address already in use") {
				err = fmt.Errorf("%w: %w", errPortTaken, err)
			}
			return fmt.Errorf("kubetest: %s did not become ready: %w", p.name, err)
		}
		status, err := probe(ctx, client, url, token)
		switch {
		case err != nil:
			last = err.Error()
		case status == http.StatusOK:
			return nil
		default:
			last = "HTTP " + strconv.Itoa(status)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("kubetest: %s not ready at %s (last answer: %s): %w", p.name, url, last, ctx.Err())
		case <-p.done:
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func probe(ctx context.Context, client *http.Client, url, token string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, nil
}

// withLogs appends the tail of each started process's log to a start error.
func (e *Env) withLogs(err error) error {
	var b strings.Builder
	for _, p := range []*process{e.etcd, e.apiserver} {
		if p == nil {
			continue
		}
		fmt.Fprintf(&b, "\n--- last %d lines of %s output ---\n%s", logTailLines, p.name, p.logTail(logTailLines))
	}
	if b.Len() == 0 {
		return err
	}
	return fmt.Errorf("%w%s", err, b.String())
}

// AdminConfig returns a fresh config for a token user in system:masters.
func (e *Env) AdminConfig() *rest.Config {
	return e.config(e.admin)
}

// UserConfig returns a fresh config for a token user declared in Options.Users. It panics for
// an undeclared name, which is a bug in the calling test.
func (e *Env) UserConfig(name string) *rest.Config {
	c, ok := e.users[name]
	if !ok {
		panic(fmt.Sprintf("kubetest: user %q was not declared in Options.Users", name))
	}
	return e.config(c)
}

func (e *Env) config(c *credential) *rest.Config {
	return &rest.Config{
		Host:            e.host,
		BearerToken:     c.token,
		TLSClientConfig: rest.TLSClientConfig{CAData: slices.Clone(e.caData)},
		UserAgent:       "kubetest/" + c.user.Name,
		// Tests create objects in bursts; client-go's default of 5 QPS only slows them down.
		QPS:   200,
		Burst: 400,
	}
}

// Kubeconfig writes a kubeconfig file for user (the admin if user is "") into the environment's
// temp dir, for running real binaries against it. The file is removed by Stop.
func (e *Env) Kubeconfig(user string) (string, error) {
	c := e.admin
	if user != "" {
		var ok bool
		if c, ok = e.users[user]; !ok {
			return "", fmt.Errorf("kubetest: user %q was not declared in Options.Users", user)
		}
	}
	path := filepath.Join(e.dir, c.kubecf)
	if err := WriteKubeconfig(path, e.host, e.caData, c.user.Name, c.token); err != nil {
		return "", fmt.Errorf("kubetest: kubeconfig for %q: %w", c.user.Name, err)
	}
	return path, nil
}

// Stop kills kube-apiserver and etcd by their PIDs, waits for both to exit and removes the
// temp dir. It is idempotent, and safe on a nil Env.
func (e *Env) Stop() error {
	if e == nil {
		return nil
	}
	e.stopOnce.Do(func() {
		var errs []error
		errs = append(errs, e.apiserver.kill(), e.etcd.kill())
		if e.dir != "" {
			if err := os.RemoveAll(e.dir); err != nil {
				errs = append(errs, fmt.Errorf("removing %s: %w", e.dir, err))
			}
		}
		if err := errors.Join(errs...); err != nil {
			e.stopErr = fmt.Errorf("kubetest: stopping: %w", err)
		}
	})
	return e.stopErr
}
