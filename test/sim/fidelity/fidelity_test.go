package fidelity_test

import (
	"testing"

	"github.com/Azure/eno-tombstone-recovery/adapters/memory/apiserver"
)

// Widgets are a custom resource of a CRD the sequences create, as the simulation serves one
// downstream for stories with a CRD among the tombstones.
var widgets = apiserver.Resource{Group: "example.com", Version: "v1", Resource: "widgets", Kind: "Widget", Namespaced: true}

const (
	namespaces = "/api/v1/namespaces"
	cms        = "/api/v1/namespaces/{ns}/configmaps"
	secrets    = "/api/v1/namespaces/{ns}/secrets"
	comps      = "/apis/eno.azure.io/v1/namespaces/{ns}/compositions"
	rslices    = "/apis/eno.azure.io/v1/namespaces/{ns}/resourceslices"
	crds       = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
	widgetsIn  = "/apis/example.com/v1/namespaces/{ns}/widgets"

	// metadataOnly is what client-go's metadata client asks for (adapters/k8s reads downstream
	// objects and the inventory Secrets' metadata with it).
	metadataOnly     = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json"
	metadataListOnly = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"

	noUID = "00000000-0000-4000-8000-000000000000"
)

// crdFields are the fields of a CRD the simulation reads.
var crdFields = []string{"kind", "apiVersion", "metadata.name", "metadata.uid", "metadata.resourceVersion", "metadata.generation",
	"metadata.creationTimestamp", "metadata.deletionTimestamp", "metadata.deletionGracePeriodSeconds", "metadata.finalizers", "spec.group", "spec.names", "spec.scope"}

func newNamespace() step {
	return create(namespaces, `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"{ns}"}}`)
}

// sequences are what the simulation relies on the in-memory API server for, each replayed
// against it and against kube-apiserver.
var sequences = []sequence{
	{name: "core", steps: []step{
		newNamespace(),
		create(cms, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","labels":{"app":"x"}},"data":{"k":"1"}}`).saving("a"),
		create(cms, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"b","labels":{"app":"y"}},"data":{"k":"2"}}`),
		create(cms, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"},"data":{"k":"3"}}`).named("create again: AlreadyExists"),
		get(cms + "/a"),
		get(cms + "/missing").named("get: NotFound"),
		list(cms, "labelSelector=app%3Dx"),
		list(cms, "labelSelector=app+in+%28x%2Cy%29"),
		list(cms, "fieldSelector=metadata.name%3Db"),
		list(cms, "fieldSelector=data.k%3D1").named("list: an unsupported field label"),
		list(cms, "labelSelector=app+in+%28").named("list: a malformed label selector"),
		// Accepted gap "no pages": the simulated server ignores limit and answers every item at
		// once, without a continue token; kube-apiserver pages. A client that follows continue
		// tokens (adapters/k8s ListSlices, 500 a page) reads the same items from both, so the
		// pages are compared concatenated; the simulation never holds 500 slices.
		list(cms, "limit=1").allPages().named("list: every page of limit=1"),
		update(cms+"/a", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","labels":{"app":"x"},"resourceVersion":"{rv:a}"},"data":{"k":"10"}}`).saving("a2"),
		update(cms+"/a", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","labels":{"app":"x"},"resourceVersion":"{rv:a}"},"data":{"k":"11"}}`).named("update with a stale resourceVersion: Conflict"),
		update(cms+"/a", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","labels":{"app":"x"},"uid":"`+noUID+`"},"data":{"k":"12"}}`).named("update with another UID: Conflict"),
		update(cms+"/a", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","labels":{"app":"x"}},"data":{"k":"13"}}`).named("update without resourceVersion: unconditional for a built-in kind").saving("a3"),
		update(cms+"/a", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","labels":{"app":"x"},"resourceVersion":"{rv:a3}"},"data":{"k":"13"}}`).named("a no-op update: the same resourceVersion"),
		update(cms+"/missing", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"missing","resourceVersion":"1"},"data":{"k":"1"}}`).named("update of a missing object: NotFound"),
		get(cms + "/a").accepting(metadataOnly).named("get as PartialObjectMetadata"),
		list(cms, "labelSelector=app%3Dx").accepting(metadataListOnly).named("list as PartialObjectMetadataList"),
		create(secrets, `{"apiVersion":"v1","kind":"Secret","metadata":{"name":"inv","labels":{"owner":"us"}},"type":"example.com/inventory","data":{"k":"MQ=="}}`),
		create(secrets, `{"apiVersion":"v1","kind":"Secret","metadata":{"name":"other","labels":{"owner":"us"}},"type":"Opaque"}`),
		list(secrets, "labelSelector=owner%3Dus&fieldSelector=type%3Dexample.com%2Finventory").named("list secrets by label and type"),
		mergePatch(cms+"/a", `{"data":{"k":"14","j":"1"}}`).named("merge patch"),
		mergePatch(cms+"/a", `{"data":{"j":null}}`).named("merge patch removing a key"),
		create(cms, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"generateName":"gen-"}}`).named("create with generateName").comparing("metadata.generateName", "metadata.uid", "metadata.resourceVersion"),
		create("/api/v1/namespaces/{ns}-missing/configmaps", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"}}`).named("create in a missing namespace: NotFound"),
		del(cms+"/b", ""),
		del(cms+"/b", "").named("delete again: NotFound"),
		get(cms + "/b"),
	}},
	{name: "composition", steps: []step{
		newNamespace(),
		create(comps, `{"apiVersion":"eno.azure.io/v1","kind":"Composition","metadata":{"name":"c","labels":{"team":"t"},"finalizers":["eno.azure.io/cleanup"]},"spec":{"synthesizer":{"name":"s"}},"status":{"dropped":"on create"}}`).saving("c"),
		update(comps+"/c", `{"apiVersion":"eno.azure.io/v1","kind":"Composition","metadata":{"name":"c","labels":{"team":"t"},"finalizers":["eno.azure.io/cleanup"]},"spec":{"synthesizer":{"name":"s2"}}}`).named("update without resourceVersion: Invalid for a custom resource"),
		update(comps+"/c", `{"apiVersion":"eno.azure.io/v1","kind":"Composition","metadata":{"name":"c","labels":{"team":"t"},"finalizers":["eno.azure.io/cleanup"],"resourceVersion":"{rv:c}"},"spec":{"synthesizer":{"name":"s2"}}}`).named("update of spec: generation 2").saving("c2"),
		update(comps+"/c", `{"apiVersion":"eno.azure.io/v1","kind":"Composition","metadata":{"name":"c","labels":{"team":"t2"},"finalizers":["eno.azure.io/cleanup"],"resourceVersion":"{rv:c2}"},"spec":{"synthesizer":{"name":"s2"}},"status":{"ignored":"on the main resource"}}`).named("update of metadata only: the generation stays, status is ignored").saving("c3"),
		mergePatch(comps+"/c/status", `{"spec":{"ignored":true},"status":{"currentSynthesis":{"uuid":"u1","synthesized":"2026-01-01T00:00:00Z"}}}`).as("eno").named("merge patch of the status subresource: spec is ignored").saving("c4"),
		jsonPatch(comps+"/c/status", `[{"op":"test","path":"/status/currentSynthesis/uuid","value":"u0"}]`).named("JSON patch with a failing test: 422"),
		jsonPatch(comps+"/c/status", `[{"op":"test","path":"/metadata/resourceVersion","value":"{rv:c3}"},{"op":"add","path":"/status/x","value":1}]`).named("JSON patch testing a stale resourceVersion: 422"),
		jsonPatch(comps+"/c/status", `[{"op":"test","path":"/metadata/uid","value":"{uid:c}"},{"op":"test","path":"/metadata/resourceVersion","value":"{rv:c4}"},{"op":"test","path":"/status/currentSynthesis/uuid","value":"u1"},{"op":"test","path":"/status/inFlightSynthesis","value":null},{"op":"test","path":"/status/currentSynthesis/resourceSlices","value":null},{"op":"add","path":"/status/currentSynthesis/resourceSlices","value":[{"name":"s1"}]}]`).as("tombstone-recovery").named("the commit's JSON patch, passing: tests of null on absent paths, add").saving("c5"),
		jsonPatch(comps+"/c/status", `[{"op":"test","path":"/metadata/resourceVersion","value":"{rv:c5}"},{"op":"test","path":"/status/currentSynthesis/resourceSlices","value":[{"name":"s1"}]},{"op":"add","path":"/status/currentSynthesis/resourceSlices/-","value":{"name":"s2"}}]`).as("tombstone-recovery").named("the commit's JSON patch, appending with /-").saving("c6"),
		jsonPatch(comps+"/c/status", `[{"op":"test","path":"/status/inFlightSynthesis","value":{"uuid":"u2"}}]`).named("JSON patch testing an absent path for a value: 422"),
		jsonPatch(comps+"/c/status", `[{"op":"bogus","path":"/status/x","value":1}]`).named("JSON patch with an unknown op"),
		jsonPatch(comps+"/c/status", `{"op":"add"}`).named("JSON patch that is not a list: 400"),
		mergePatch(comps+"/c", `{"metadata":{"resourceVersion":"{rv:c5}","annotations":{"a":"1"}}}`).named("merge patch carrying a stale resourceVersion: Conflict"),
		mergePatch(comps+"/c", `{"metadata":{"resourceVersion":"{rv:c5}","uid":"`+noUID+`","annotations":{"a":"1"}}}`).named("merge patch carrying another UID and a stale resourceVersion: Conflict"),
		mergePatch(comps+"/c", `{"metadata":{"resourceVersion":"{rv:c6}","uid":"`+noUID+`","annotations":{"a":"1"}}}`).named("merge patch carrying another UID: Invalid, the UID is immutable"),
		update(comps+"/c", `{"apiVersion":"eno.azure.io/v1","kind":"Composition","metadata":{"name":"c","resourceVersion":"{rv:c5}","uid":"`+noUID+`"}}`).named("update with another UID and a stale resourceVersion: the UID precondition's Conflict"),
		mergePatch(comps+"/c", `{"metadata":{"resourceVersion":"{rv:c6}","uid":"{uid:c}","annotations":{"a":"1"}}}`).named("merge patch carrying the UID and resourceVersion").saving("c7"),
		mergePatch(comps+"/c", `{"status":{"currentSynthesis":null}}`).named("merge patch of status on the main resource: a no-op"),
		update(comps+"/c/status", `{"apiVersion":"eno.azure.io/v1","kind":"Composition","metadata":{"name":"c","resourceVersion":"{rv:c7}"},"spec":{"ignored":true},"status":{"currentSynthesis":{"uuid":"u3"}}}`).as("eno").named("update of the status subresource"),
		get(comps + "/c/status"),
		update(comps+"/c/status", `{"apiVersion":"eno.azure.io/v1","kind":"Composition","metadata":{"name":"c","resourceVersion":"{rv:c7}"},"status":{}}`).named("update of the status subresource with a stale resourceVersion: Conflict"),
		mergePatch(comps+"/missing/status", `{"status":{"x":1}}`).named("patch of a missing object's status: NotFound"),
		list(comps, "labelSelector=team%3Dt2"),
		list(comps, "fieldSelector=spec.x%3D1").named("list of a custom resource: an unsupported field label"),
		list(secrets, "fieldSelector=data.x%3D1").named("list of secrets: an unsupported field label"),
		list(rslices, "limit=1").allPages().named("list of no object, paged"),
	}},
	{name: "preconditions", steps: []step{
		newNamespace(),
		create(cms, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"p"},"data":{"k":"1"}}`).saving("p"),
		mergePatch(cms+"/p", `{"data":{"k":"2"}}`).saving("p2"),
		del(cms+"/p", `{"preconditions":{"uid":"`+noUID+`"}}`).named("delete with another UID: Conflict"),
		del(cms+"/p", `{"preconditions":{"resourceVersion":"{rv:p}"}}`).named("delete with a stale resourceVersion: Conflict"),
		del(cms+"/p", `{"preconditions":{"uid":"{uid:p}","resourceVersion":"{rv:p2}"}}`).named("delete with both preconditions met"),
		get(cms + "/p"),
		create(rslices, `{"apiVersion":"eno.azure.io/v1","kind":"ResourceSlice","metadata":{"name":"s"},"spec":{"resources":[]}}`).saving("s"),
		del(rslices+"/s", `{"preconditions":{"uid":"`+noUID+`"}}`).named("delete of a custom resource with another UID: Conflict"),
		del(rslices+"/s", `{"preconditions":{"resourceVersion":"1"}}`).named("delete of a custom resource with another resourceVersion: Conflict"),
		del(rslices+"/s", `{"preconditions":{"uid":"{uid:s}"}}`).named("delete of a custom resource with its UID"),
		del(rslices+"/s", `{"preconditions":{"uid":"{uid:s}"}}`).named("delete of a custom resource that is gone: NotFound"),
	}},
	{name: "finalizers", steps: []step{
		newNamespace(),
		create(rslices, `{"apiVersion":"eno.azure.io/v1","kind":"ResourceSlice","metadata":{"name":"f","finalizers":["eno.azure.io/cleanup"]},"spec":{"resources":[]}}`).saving("f"),
		del(rslices+"/f", "").named("delete with a finalizer: terminating, kept"),
		get(rslices + "/f").saving("f2"),
		del(rslices+"/f", "").named("delete of a terminating object"),
		update(rslices+"/f", `{"apiVersion":"eno.azure.io/v1","kind":"ResourceSlice","metadata":{"name":"f","resourceVersion":"{rv:f2}","finalizers":["eno.azure.io/cleanup","example.com/new"]},"spec":{"resources":[]}}`).named("a new finalizer on a terminating object: Invalid"),
		mergePatch(rslices+"/f", `{"metadata":{"labels":{"still":"writable"}}}`).named("a write to a terminating object"),
		jsonPatch(rslices+"/f", `[{"op":"remove","path":"/metadata/finalizers"}]`).named("removing the last finalizer: gone"),
		get(rslices + "/f"),
		jsonPatch(rslices+"/f", `[{"op":"remove","path":"/metadata/finalizers"}]`).named("removing the finalizers of an object that is gone: NotFound"),
		create(rslices, `{"apiVersion":"eno.azure.io/v1","kind":"ResourceSlice","metadata":{"name":"h"},"spec":{"resources":[]}}`),
		jsonPatch(rslices+"/h", `[{"op":"remove","path":"/metadata/finalizers"}]`).named("removing absent finalizers: 422"),
		create(cms, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"g","finalizers":["example.com/hold"]}}`),
		del(cms+"/g", "").named("delete of a built-in kind with a finalizer"),
		get(cms + "/g").saving("g"),
		update(cms+"/g", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"g","resourceVersion":"{rv:g}"}}`).named("an update removing the finalizer: gone"),
		get(cms + "/g"),
	}},
	{name: "managed-fields", timed: true, steps: []step{
		newNamespace(),
		create(cms, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"m","labels":{"l":"1"}},"data":{"a":"1"}}`).as("alice").saving("m"),
		update(cms+"/m", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"m","labels":{"l":"1"}},"data":{"a":"1","b":"2"}}`).as("bob").named("another manager adds a field: its entry, its time"),
		update(cms+"/m", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"m","labels":{"l":"1"}},"data":{"a":"1","b":"2"}}`).as("carol").named("a no-op update: no entry, no time moves"),
		update(cms+"/m", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"m","labels":{"l":"1"}},"data":{"a":"3","b":"2"}}`).as("alice").named("a manager changes its own field: its time moves"),
		update(cms+"/m", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"m","labels":{"l":"1"}},"data":{"a":"3","b":"4"}}`).as("alice").named("a manager takes another's field"),
		update(cms+"/m", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"m","labels":{"l":"1"}},"data":{"a":"3"}}`).as("bob").named("a write that only removes a field: no entry, no time"),
		mergePatch(cms+"/m", `{"metadata":{"annotations":{"x":"y"}}}`).as("dave").named("a merge patch by a fourth manager"),
		mergePatch(cms+"/m", `{"metadata":{"managedFields":[{}]}}`).as("eve").named("managedFields reset with [{}]: none"),
		mergePatch(cms+"/m", `{"data":{"c":"5"}}`).as("bob").named("an update of an object without managedFields tracks none"),
		create(comps, `{"apiVersion":"eno.azure.io/v1","kind":"Composition","metadata":{"name":"c"},"spec":{"synthesizer":{"name":"s"}}}`).as("alice"),
		mergePatch(comps+"/c/status", `{"status":{"currentSynthesis":{"uuid":"u1"}}}`).as("eno").named("a status write: an entry of the status subresource"),
		mergePatch(comps+"/c/status", `{"status":{"currentSynthesis":{"uuid":"u1"}}}`).as("eno").named("a no-op status write"),
		mergePatch(comps+"/c/status", `{"status":{"currentSynthesis":{"uuid":"u2"}}}`).as("eno").named("a status write moves the status entry's time only"),
		mergePatch(comps+"/c", `{"metadata":{"annotations":{"a":"1"},"finalizers":["f.example.com/x"],"ownerReferences":[{"apiVersion":"v1","kind":"ConfigMap","name":"m","uid":"{uid:m}"}]}}`).as("bob").named("annotations, a finalizer and an ownerReference by another manager"),
		mergePatch(comps+"/c", `{"metadata":{"finalizers":null}}`).as("bob").named("a finalizer removed: the entry loses it, its time stays"),
	}},
	{name: "gc-api", steps: []step{
		newNamespace(),
		create(cms, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"owner"}}`).saving("o"),
		create(cms, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"dep","ownerReferences":[{"apiVersion":"v1","kind":"ConfigMap","name":"owner","uid":"{uid:o}","blockOwnerDeletion":true,"controller":true}]}}`),
		del(cms+"/owner", `{"propagationPolicy":"Foreground"}`).named("foreground deletion: the foregroundDeletion finalizer"),
		del(cms+"/owner", `{"propagationPolicy":"Orphan"}`).named("a second delete switching to orphan"),
		create(cms, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"owner2"}}`),
		del(cms+"/owner2", "").withQuery("propagationPolicy=Orphan").named("orphan deletion by query: the orphan finalizer"),
		create(cms, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"owner3"}}`),
		del(cms+"/owner3", `{"propagationPolicy":"Background"}`).named("background deletion: gone at once"),
		create(comps, `{"apiVersion":"eno.azure.io/v1","kind":"Composition","metadata":{"name":"c"}}`).saving("c"),
		create(rslices, `{"apiVersion":"eno.azure.io/v1","kind":"ResourceSlice","metadata":{"name":"s","finalizers":["eno.azure.io/cleanup"],"ownerReferences":[{"apiVersion":"eno.azure.io/v1","kind":"Composition","name":"c","uid":"{uid:c}","blockOwnerDeletion":true,"controller":true}]},"spec":{"resources":[]}}`),
		del(comps+"/c", `{"propagationPolicy":"Foreground"}`).named("foreground deletion of a custom resource"),
		get(rslices + "/s"),
	}},
	{name: "namespace-deletion", steps: []step{
		newNamespace(),
		create(cms, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"}}`),
		del(namespaces+"/{ns}", "").named("delete of a namespace: terminating"),
		get(namespaces + "/{ns}"),
		del(namespaces+"/{ns}", "").named("delete of a terminating namespace"),
		get(cms + "/x").named("its objects stay until the namespace controller runs"),
		// kube-apiserver's namespace lifecycle admission reads namespaces from an informer: a
		// create right after the DELETE may pass it; it is refused once the cache has caught up.
		create(cms, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"y"}}`).named("create in a terminating namespace: Forbidden").retriedUntil(403),
		mergePatch(cms+"/x", `{"data":{"k":"1"}}`).named("a write to an object of a terminating namespace"),
		// Not compared: the namespace controller (kube-controller-manager) that empties the
		// namespace; the simulation's FinishNamespaceDeletion stands in for it.
	}},
	{name: "crd-deletion", steps: []step{
		newNamespace(),
		// Accepted gap "CRD defaulting and status": the simulated server neither defaults
		// spec.conversion nor writes a CRD's status (acceptedNames, conditions, storedVersions,
		// kube-apiserver's status entry in managedFields), and its FieldsV1 for a CRD's spec
		// carries "." where the typed schema has none. The simulation reads none of these: it
		// deletes a CRD as a tombstone and cascades its objects. Only what it reads is compared.
		create(crds, `{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"widgets.example.com"},"spec":{"group":"example.com","scope":"Namespaced","names":{"kind":"Widget","listKind":"WidgetList","plural":"widgets","singular":"widget"},"versions":[{"name":"v1","served":true,"storage":true,"schema":{"openAPIV3Schema":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}}]}}`).
			named("create the Widget CRD").comparing(crdFields...),
		untilServed(widgetsIn),
		create(widgetsIn, `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"size":1}}`),
		del(crds+"/widgets.example.com", "").named("delete of a CRD: terminating, with the cleanup finalizer").comparing(crdFields...),
		untilGone(crds + "/widgets.example.com"),
		// Accepted gap "static resources": the simulated server serves a custom resource
		// whether or not its CRD exists; kube-apiserver answers a plain-text 404 once the CRD is
		// gone. client-go reads both as NotFound. Where it would matter (Eno applying an
		// object of a deleted CRD), the simulation would create what the real server refuses.
		get(widgetsIn + "/w").statusCodeOnly().named("an object of the deleted CRD: NotFound"),
	}},
}

// TestFidelity replays each sequence against the simulated API server and against
// kube-apiserver, and compares every response.
func TestFidelity(t *testing.T) {
	resources := append(apiserver.DefaultResources(), widgets)
	for _, seq := range sequences {
		t.Run(seq.name, func(t *testing.T) {
			compare(t, seq, resources)
		})
	}
}
