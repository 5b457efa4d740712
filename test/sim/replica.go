package sim

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"

	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"

	"github.com/Azure/eno-tombstone-recovery/adapters/k8s"
	"github.com/Azure/eno-tombstone-recovery/adapters/memory/apiserver"
	"github.com/Azure/eno-tombstone-recovery/adapters/memory/enomodel"
	"github.com/Azure/eno-tombstone-recovery/app"
	"github.com/Azure/eno-tombstone-recovery/domain"
)

// Request is one API request a replica is about to make, as the scheduler sees it.
type Request struct {
	Cluster string // "cp" or "ds"
	Method  string
	Path    string
	Query   string
	Body    string
}

func (r Request) String() string {
	s := r.Cluster + " " + r.Method + " " + r.Path
	if r.Query != "" {
		s += "?" + r.Query
	}
	return s
}

// IsCommit is the commit point: the JSON patch on a Composition's status.
func (r Request) IsCommit() bool {
	return r.Cluster == "cp" && r.Method == http.MethodPatch && strings.Contains(r.Path, "/compositions/") && strings.HasSuffix(r.Path, "/status")
}

// IsSliceCreate is a recovery slice's creation (a publish, or step 4's re-creation).
func (r Request) IsSliceCreate() bool {
	return r.Cluster == "cp" && r.Method == http.MethodPost && strings.HasSuffix(r.Path, "/resourceslices")
}

// IsSliceUpdate is a PUT of a slice: a rewrite, a seal or a withdrawal.
func (r Request) IsSliceUpdate() bool {
	return r.Cluster == "cp" && r.Method == http.MethodPut && strings.Contains(r.Path, "/resourceslices/")
}

// IsDecision is a PUT or merge patch of a Composition (the decision, or force-resynthesis).
func (r Request) IsCompositionWrite() bool {
	return r.Cluster == "cp" && (r.Method == http.MethodPut || r.Method == http.MethodPatch) &&
		strings.Contains(r.Path, "/compositions/") && !strings.HasSuffix(r.Path, "/status")
}

// IsDisarm is the merge patch that removes a Composition's arming annotation.
func (r Request) IsDisarm() bool {
	return r.IsCompositionWrite() && r.Method == http.MethodPatch && strings.Contains(r.Body, `"`+domain.AnnotationArmed+`":"`+domain.ArmedOff+`"`)
}

// IsDownstreamRead is a read of an object downstream other than the inventory.
func (r Request) IsDownstreamRead() bool {
	return r.Cluster == "ds" && r.Method == http.MethodGet && !strings.Contains(r.Path, "/secrets")
}

// Verdict is what the scheduler lets a pending request do.
type Verdict int

const (
	// Proceed serves the request.
	Proceed Verdict = iota
	// CrashBefore stops the replica with the request not applied.
	CrashBefore
	// CrashAfter stops the replica with the request applied and its answer lost.
	CrashAfter
	// Unavailable answers 503 without applying it.
	Unavailable
)

var errCrashed = errors.New("sim: the replica stopped")

type pending struct {
	req   Request
	reply chan Verdict
}

type event struct {
	req  *pending
	done *outcome
}

type outcome struct {
	res app.Result
	err error
}

func (o *outcome) String() string {
	var parts []string
	if o.res.Skipped != nil {
		parts = append(parts, "skipped: "+o.res.Skipped.Error())
	}
	if rec := o.res.Recovery; rec != nil {
		d := rec.Plan.Decision
		parts = append(parts, fmt.Sprintf("decision %s/%s (%d tombstones, written %v)", d.Outcome, d.Reason, d.Tombstones, rec.Written))
	}
	if o.res.Recording != nil {
		parts = append(parts, "recording ran")
	}
	if o.err != nil {
		parts = append(parts, "error: "+o.err.Error())
	}
	if len(parts) == 0 {
		return "reconcile done"
	}
	return "reconcile done: " + strings.Join(parts, "; ")
}

// replica is one tombstone-recovery process: the real app.Service on the real adapters/k8s,
// with every API request it makes held until the scheduler lets it through, and caches that
// serve a view of the API some writes old.
type replica struct {
	name   string
	w      *World
	svc    *app.Service
	events chan event
	cancel context.CancelFunc

	running bool
	// crashed is read by the request goroutines of the process (client-go's discovery fetches
	// in parallel), so it is atomic.
	crashed atomic.Bool
	pending *pending
	last    *outcome
	// compRev and chunkRev are the revisions the Composition cache and the inventory cache
	// show; they only move forward.
	compRev, chunkRev int64
}

type gate struct {
	r       *replica
	cluster string
	next    http.RoundTripper
}

func (g *gate) RoundTrip(req *http.Request) (*http.Response, error) {
	if g.r.crashed.Load() {
		return nil, errCrashed
	}
	if isDiscovery(req.URL.Path) {
		// client-go fetches discovery documents from parallel goroutines, in no fixed order;
		// they are static and change nothing, so they bypass the scheduler and a seed replays.
		return g.next.RoundTrip(req)
	}
	var body []byte
	if req.Body != nil {
		body, _ = io.ReadAll(req.Body)
		_ = req.Body.Close()
		req.Body = io.NopCloser(bytes.NewReader(body))
	}
	p := &pending{req: Request{Cluster: g.cluster, Method: req.Method, Path: req.URL.Path, Query: req.URL.RawQuery, Body: string(body)},
		reply: make(chan Verdict)}
	g.r.events <- event{req: p}
	switch <-p.reply {
	case CrashBefore:
		return nil, errCrashed
	case CrashAfter:
		resp, err := g.serve(req, p.req)
		if err == nil {
			_ = resp.Body.Close()
		}
		return nil, errCrashed
	case Unavailable:
		msg := `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"the server is currently unable to handle the request","reason":"ServiceUnavailable","code":503}`
		return &http.Response{StatusCode: http.StatusServiceUnavailable, Status: "503 Service Unavailable",
			Header: http.Header{"Content-Type": {"application/json"}}, Body: io.NopCloser(strings.NewReader(msg)),
			Request: req, ContentLength: int64(len(msg))}, nil
	}
	return g.serve(req, p.req)
}

// isDiscovery is a discovery document's path: /api, /api/v1, /apis or /apis/<group>/<version>.
func isDiscovery(path string) bool {
	p := strings.Split(strings.Trim(path, "/"), "/")
	return (p[0] == "api" && len(p) <= 2) || (p[0] == "apis" && (len(p) == 1 || len(p) == 3))
}

// serve sends the request on, and tells the oracle of a disarm that landed.
func (g *gate) serve(req *http.Request, r Request) (*http.Response, error) {
	resp, err := g.next.RoundTrip(req)
	if err == nil && resp.StatusCode < 300 && r.IsDisarm() {
		g.r.w.oracle.disarmed.Store(true)
	}
	if err == nil && resp.StatusCode < 300 && r.IsCompositionWrite() {
		g.r.w.noteDecision(r.Body)
	}
	return resp, err
}

func gated(cfg *rest.Config, g *gate) *rest.Config {
	c := rest.CopyConfig(cfg)
	g.next = c.Transport
	c.Transport = g
	c.QPS, c.Burst = -1, 0
	return c
}

// newReplica builds a replica with empty caches: they show the API as it is now.
func (w *World) newReplica(name string) *replica {
	r := &replica{name: name, w: w, events: make(chan event)}
	r.boot()
	return r
}

func (r *replica) boot() {
	w := r.w
	r.compRev, r.chunkRev = w.cp.Revision(), w.ds.Revision()
	cpCfg := gated(w.cp.RESTConfig(controllerManager), &gate{r: r, cluster: "cp"})
	dsCfg := gated(w.ds.RESTConfig(controllerManager), &gate{r: r, cluster: "ds"})
	cpDyn := must(dynamic.NewForConfig(cpCfg))
	dsCore := must(kubernetes.NewForConfig(dsCfg)).CoreV1()
	dsMeta := must(metadata.NewForConfig(dsCfg))
	disc := must(discovery.NewDiscoveryClientForConfig(dsCfg))
	// The replicas serve one shard, the story's namespace: their cache holds its Compositions only.
	comps := must(k8s.NewCompositions(cpDyn, &staleLister{view: func() view { return w.cp.ViewAt(r.compRev) }, shard: shardNamespace}))
	secrets := must(k8s.NewSecretStore(dsCore, nil, domain.DefaultInventoryNamespace))
	store := &staleChunks{SecretStore: secrets, view: func() view { return w.ds.ViewAt(r.chunkRev) }}
	cfg := app.DefaultConfig()
	cfg.Enabled, cfg.ControlPlane = true, "sim"
	cfg.Scope.Namespace = shardNamespace
	cfg.Now = w.clock.Now
	cfg.PendingRecheckInterval = w.opts.RecheckInterval
	cfg.MaxTombstoneFraction = 1
	r.svc = must(app.New(cfg, app.Deps{
		Compositions: comps, Live: comps, Decisions: comps, Fleet: r.fleet(),
		Slices: must(k8s.NewSlices(cpDyn)), Sink: must(k8s.NewTombstoneSink(cpDyn)),
		Store: store, Downstream: must(k8s.NewDownstreamObjects(dsMeta, must(dynamic.NewForConfig(dsCfg)), disc)), Events: &r.w.events,
	}))
}

// fleet is the replica's fleet index: what informers of every slice and Composition hold at the
// replica's cache revision, some writes old. WaitForSlice catches the index up to the present,
// as a watch does while the hand-off waits.
func (r *replica) fleet() enomodel.Fleet {
	return enomodel.Fleet{View: func() apiserver.View { return r.w.cp.Server.ViewAt(r.compRev) },
		CatchUp: func() { r.compRev = max(r.compRev, r.w.cp.Revision()) }}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// start begins a reconcile of ref and runs it to its first request.
func (r *replica) start(ref domain.CompositionRef) {
	if r.running {
		panic("sim: replica " + r.name + " is already reconciling")
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	r.running = true
	go func() {
		res, err := r.svc.Reconcile(ctx, ref)
		r.events <- event{done: &outcome{res: res, err: err}}
	}()
	r.await()
}

// await takes the replica's next event: its next request, or the end of the reconcile.
func (r *replica) await() {
	ev := <-r.events
	if ev.req != nil {
		r.pending = ev.req
		return
	}
	r.pending = nil
	r.running = false
	r.last = ev.done
	r.w.noteReport(ev.done)
	r.cancel()
	r.w.logf("replica %s: %s", r.name, ev.done)
	if r.crashed.Load() {
		r.crashed.Store(false)
		r.boot() // a new process: empty caches
	}
}

// step lets the pending request through with v and runs the replica to its next event.
func (r *replica) step(v Verdict) Request {
	p := r.pending
	if p == nil {
		panic("sim: replica " + r.name + " has no pending request")
	}
	if v == CrashBefore || v == CrashAfter {
		r.crashed.Store(true)
	}
	p.reply <- v
	r.await()
	for r.crashed.Load() && r.running { // a stopped process makes no more requests: drain them
		r.pending.reply <- CrashBefore
		r.await()
	}
	return p.req
}

// finish runs the reconcile to its end, every request served but for the world's persistent
// faults (verdictFor).
func (r *replica) finish() {
	for r.running {
		r.step(r.w.verdictFor(r.pending.req))
	}
}

// reconcile runs one whole reconcile of ref.
func (r *replica) reconcile(ref domain.CompositionRef) *outcome {
	r.start(ref)
	r.finish()
	return r.last
}

// runUntil serves requests until the pending one matches, and reports whether it got there
// (false: the reconcile ended first).
func (r *replica) runUntil(match func(Request) bool) bool {
	for r.running {
		if match(r.pending.req) {
			return true
		}
		r.step(Proceed)
	}
	return false
}

func (r *replica) String() string {
	state := "idle"
	if r.running {
		state = fmt.Sprintf("at %s", r.pending.req)
	}
	return fmt.Sprintf("replica %s (%s)", r.name, state)
}

// noteReport keeps what a reconcile reported: the reason each object was kept, and the
// outcome of its decision (written, or lost with a crash: the next reconcile writes it).
func (w *World) noteReport(o *outcome) {
	rec := o.res.Recovery
	if rec == nil || rec.Plan.Decision.Outcome.IsZero() {
		return
	}
	w.outcome, w.decisionReason = rec.Plan.Decision.Outcome, rec.Plan.Decision.Reason
	for _, d := range rec.Plan.Dropped {
		id := d.Tombstone.Entry.ID()
		w.reported[enomodel.Ref{Group: id.Group, Kind: id.Kind, Namespace: id.Namespace, Name: id.Name}] = d.Reason.String() + ": " + d.Detail
	}
	for _, h := range rec.Plan.Held {
		id := h.Entry.ID()
		w.reported[enomodel.Ref{Group: id.Group, Kind: id.Kind, Namespace: id.Namespace, Name: id.Name}] = rec.Plan.Decision.Reason + ": held"
	}
}

// noteDecision keeps the outcome of a decision a replica wrote, as the operator reads it: a
// crash after the write loses the reconcile's own report of it.
func (w *World) noteDecision(body string) {
	var obj struct {
		Metadata struct {
			Annotations map[string]*string `json:"annotations"`
		} `json:"metadata"`
	}
	if json.Unmarshal([]byte(body), &obj) != nil || obj.Metadata.Annotations[domain.AnnotationDecision] == nil {
		return
	}
	if d, err := domain.ParseDecision(*obj.Metadata.Annotations[domain.AnnotationDecision]); err == nil {
		w.outcome, w.decisionReason = d.Outcome, d.Reason
	}
}

// eventLog is the Events every replica records, as an operator would read them: the oracle
// counts a Warning that names a skipped cleanup as said.
type eventLog struct {
	mu       sync.Mutex
	warnings map[[2]string]bool // composition UID, reason
}

func (l *eventLog) Normal(domain.Composition, string, string) {}

func (l *eventLog) Warning(comp domain.Composition, reason, _ string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.warnings == nil {
		l.warnings = map[[2]string]bool{}
	}
	l.warnings[[2]string{comp.UID, reason}] = true
}

func (l *eventLog) warned(uid, reason string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.warnings[[2]string{uid, reason}]
}
