//go:build eno

package eno

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/Azure/eno-tombstone-recovery/internal/kubetest"
)

const (
	// executorContainer is the container of a synthesizer Pod that runs Eno's executor
	// (internal/controllers/synthesis/pod.go in Eno).
	executorContainer = "executor"
	// enoManagedSelector selects the Pods eno-controller creates.
	enoManagedSelector = "app.kubernetes.io/managed-by=eno"
	// executorTimeout bounds one executor run; eno-controller gives up on a synthesis after its
	// --pod-timeout (30 s) anyway.
	executorTimeout = 2 * time.Minute
)

// executorRun is one run of Eno's executor for one synthesizer Pod.
type executorRun struct {
	Pod                  string
	CompositionNamespace string
	CompositionName      string
	SynthesisUUID        string
	Started, Finished    time.Time
	Err                  error // the executor's exit, or why it could not run
	LogPath              string
}

// kubelet stands in for the kubelet of the synthesizer Pods: it watches the Pods eno-controller
// creates in one namespace and runs Eno's executor once per Pod, with the environment of the
// Pod's executor container (COMPOSITION_NAME, COMPOSITION_NAMESPACE, SYNTHESIS_UUID, IMAGE and
// the Composition's synthesisEnv, all plain values in Eno v0.2.17) plus KUBECONFIG, as the
// container would get from its service account. Pods are left Pending: eno-controller deletes
// each once its synthesis has been swapped in.
type kubelet struct {
	kube       kubernetes.Interface
	namespace  string
	executor   string // path of a file named "executor" that is eno-controller
	kubeconfig string
	logDir     string

	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu   sync.Mutex
	seen map[types.UID]bool
	runs []executorRun
}

// startKubelet starts the stand-in; stop ends it and every executor it started.
func startKubelet(kube kubernetes.Interface, namespace, executor, kubeconfig, logDir string) *kubelet {
	ctx, cancel := context.WithCancel(context.Background())
	k := &kubelet{
		kube: kube, namespace: namespace, executor: executor, kubeconfig: kubeconfig, logDir: logDir,
		cancel: cancel, seen: map[types.UID]bool{},
	}
	k.wg.Add(1)
	go func() {
		defer k.wg.Done()
		k.loop(ctx)
	}()
	return k
}

// stop cancels the watch and every running executor (killed by its PID through
// exec.CommandContext) and waits for all of them.
func (k *kubelet) stop() {
	k.cancel()
	k.wg.Wait()
}

// loop lists the Pods, then watches from that list's resourceVersion; a closed or failed watch
// starts over with a list.
func (k *kubelet) loop(ctx context.Context) {
	for ctx.Err() == nil {
		if err := k.listAndWatch(ctx); err != nil && ctx.Err() == nil {
			k.note(fmt.Sprintf("pod watch: %v", err))
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
	}
}

func (k *kubelet) listAndWatch(ctx context.Context) error {
	pods := k.kube.CoreV1().Pods(k.namespace)
	list, err := pods.List(ctx, metav1.ListOptions{LabelSelector: enoManagedSelector})
	if err != nil {
		return err
	}
	for i := range list.Items {
		k.admit(ctx, &list.Items[i])
	}
	w, err := pods.Watch(ctx, metav1.ListOptions{LabelSelector: enoManagedSelector, ResourceVersion: list.ResourceVersion})
	if err != nil {
		return err
	}
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.ResultChan():
			if !ok {
				return nil
			}
			if ev.Type == watch.Error {
				return fmt.Errorf("watch error: %v", ev.Object)
			}
			if pod, ok := ev.Object.(*corev1.Pod); ok && (ev.Type == watch.Added || ev.Type == watch.Modified) {
				k.admit(ctx, pod)
			}
		}
	}
}

// admit runs the executor for a Pod not seen before.
func (k *kubelet) admit(ctx context.Context, pod *corev1.Pod) {
	if pod.DeletionTimestamp != nil {
		return
	}
	k.mu.Lock()
	if k.seen[pod.UID] {
		k.mu.Unlock()
		return
	}
	k.seen[pod.UID] = true
	k.mu.Unlock()

	run := executorRun{Pod: pod.Name}
	var env []string
	found := false
	for _, c := range pod.Spec.Containers {
		if c.Name != executorContainer {
			continue
		}
		found = true
		for _, ev := range c.Env {
			if ev.ValueFrom != nil {
				run.Err = fmt.Errorf("env %s uses valueFrom, which the stand-in does not resolve", ev.Name)
			}
			env = append(env, ev.Name+"="+ev.Value)
			switch ev.Name {
			case "COMPOSITION_NAME":
				run.CompositionName = ev.Value
			case "COMPOSITION_NAMESPACE":
				run.CompositionNamespace = ev.Value
			case "SYNTHESIS_UUID":
				run.SynthesisUUID = ev.Value
			}
		}
	}
	if !found {
		run.Err = fmt.Errorf("pod %s has no %q container", pod.Name, executorContainer)
	}
	run.LogPath = filepath.Join(k.logDir, fmt.Sprintf("executor-%s-%s.log", run.CompositionNamespace, pod.Name))
	if run.Err != nil {
		k.record(run)
		return
	}
	k.wg.Add(1)
	go func() {
		defer k.wg.Done()
		k.record(k.execute(ctx, run, env))
	}()
}

// execute runs the executor like the container's command /eno/executor.
func (k *kubelet) execute(ctx context.Context, run executorRun, podEnv []string) executorRun {
	ctx, cancel := context.WithTimeout(ctx, executorTimeout)
	defer cancel()
	run.Started = time.Now()
	defer func() { run.Finished = time.Now() }()
	logFile, err := os.Create(run.LogPath)
	if err != nil {
		run.Err = err
		return run
	}
	defer logFile.Close()
	cmd := exec.CommandContext(ctx, k.executor)
	cmd.Env = append(append(kubetest.ChildEnv(), podEnv...), "KUBECONFIG="+k.kubeconfig)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = kubetest.ChildSysProcAttr()
	run.Err = cmd.Run()
	return run
}

func (k *kubelet) record(run executorRun) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.runs = append(k.runs, run)
}

// note keeps a problem of the stand-in itself as a run without a Pod, so it shows in the logs
// of a failing test.
func (k *kubelet) note(msg string) {
	k.record(executorRun{Err: fmt.Errorf("kubelet stand-in: %s", msg), Started: time.Now(), Finished: time.Now()})
}

// runsFor returns the finished executor runs of one Composition that started at or after since,
// in the order they finished.
func (k *kubelet) runsFor(namespace, name string, since time.Time) []executorRun {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []executorRun
	for _, r := range k.runs {
		if r.CompositionNamespace == namespace && r.CompositionName == name && !r.Started.Before(since) {
			out = append(out, r)
		}
	}
	return out
}

// runsIn returns every finished run for Compositions of one namespace, and the stand-in's own
// problems.
func (k *kubelet) runsIn(namespace string) []executorRun {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []executorRun
	for _, r := range k.runs {
		if r.CompositionNamespace == namespace || r.Pod == "" {
			out = append(out, r)
		}
	}
	return out
}
