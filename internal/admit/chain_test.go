package admit

import (
	"errors"
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/allowance"
	"github.com/kausality-io/kausality-crossplane/internal/metrics"
	"github.com/kausality-io/kausality-crossplane/internal/mutation"
	"github.com/kausality-io/kausality-crossplane/internal/policy"
)

func TestChainRefuse(t *testing.T) {
	ts := allowance.Timestamp(now)
	claimHop := allowance.Hop{APIVersion: "example.com/v1alpha1", Kind: "DatabaseClaim", Name: "orders", Generation: 2, Field: "spec.size", User: alice, Timestamp: ts}
	xrHop := allowance.Hop{APIVersion: "example.com/v1alpha1", Kind: "XDatabase", Name: "orders-x1", Generation: 4, Field: "spec.size", User: crossplane, Timestamp: ts}
	mrHop := func(gen int64, at string) allowance.Hop {
		return allowance.Hop{APIVersion: "recorder.kausality.io/v1alpha1", Kind: "Bucket", Name: "orders-data", Generation: gen, Field: "spec.forProvider.size", Timestamp: at}
	}
	size := []v1alpha1.MutationBound{{JSONPath: "spec.forProvider.size", Verbs: []v1alpha1.MutationVerb{v1alpha1.MutationMutate}}}
	bucketExt := v1alpha1.Target{External: map[string]string{"apiGroup": "recorder.kausality.io", "kind": "Bucket"}}
	xrAllowances := []allowance.Allowance{
		{Relation: v1alpha1.RelationControllerChild, Target: v1alpha1.Target{APIGroup: "recorder.kausality.io", APIVersion: "v1alpha1", Resource: "buckets"},
			Verbs: []string{v1alpha1.VerbUpdate}, Mutations: size, Generation: 4, Initiator: alice, Trace: allowance.Trace{claimHop, xrHop}},
		{Relation: v1alpha1.RelationExternal, Target: bucketExt, Verbs: []string{v1alpha1.VerbUpdate}, Generation: 4, Initiator: alice, Trace: allowance.Trace{claimHop, xrHop}},
	}
	xr := &unstructured.Unstructured{}
	xr.SetAPIVersion("example.com/v1alpha1")
	xr.SetKind("XDatabase")
	xr.SetName("orders-x1")
	xr.SetGeneration(4)
	xr.SetAnnotations(map[string]string{v1alpha1.AnnotationAllowances: allowance.Format(xrAllowances)})

	// resize is the External allowance the function stamps for the resize.
	resize := func(mods ...func(*allowance.Allowance)) allowance.Allowance {
		a := allowance.Allowance{Relation: v1alpha1.RelationExternal, Target: bucketExt, Verbs: []string{v1alpha1.VerbUpdate}, Mutations: size,
			Generation: 6, Initiator: alice, Trace: allowance.Trace{claimHop, xrHop, mrHop(6, ts)}}
		for _, m := range mods {
			m(&a)
		}
		return a
	}
	upgradeHop := allowance.Hop{APIVersion: "kausality.io/v1alpha1", Kind: v1alpha1.UpgradeAllowanceKind, Name: "buckets-2", Generation: 1}
	upgraded := allowance.ExternalGrant("recorder.kausality.io", "Bucket", v1alpha1.VerbUpdate, 6, allowance.Trace{upgradeHop, xrHop, mrHop(6, ts)})
	creation := allowance.ExternalGrant("recorder.kausality.io", "Bucket", v1alpha1.VerbCreate, 1, allowance.Trace{xrHop, mrHop(1, ts)})
	stored := bucket(map[string]any{"size": "small"})
	errBoom := errors.New("boom")
	// The pending values of a held resize to large (what the written
	// bucket sets) and to huge.
	pendingLarge := map[string]string(mutation.Record("spec", bucket(map[string]any{"size": "large"}).Object["spec"], nil))
	pendingHuge := map[string]string(mutation.Record("spec", bucket(map[string]any{"size": "huge"}).Object["spec"], nil))
	// creationGrant is what the function stamps while the composite is
	// created and the pipeline inserts (completion: a value wired into the
	// resource) or, the composite unchanged, changes (computed) a value.
	creationGrant := func(verb v1alpha1.MutationVerb) func(path string) allowance.Allowance {
		return func(path string) allowance.Allowance {
			return allowance.ExternalGrant("recorder.kausality.io", "Bucket", v1alpha1.VerbUpdate, 6, allowance.Trace{xrHop, mrHop(6, ts)}).
				Shipping([]v1alpha1.MutationBound{{JSONPath: path, Verbs: []v1alpha1.MutationVerb{verb}}})
		}
	}
	completion, computed := creationGrant(v1alpha1.MutationInsert), creationGrant(v1alpha1.MutationMutate)
	// asCreated is the composite as its creation traced it (no hop names a
	// changed field); changedByAlice after her permitted change.
	asCreated := xr.DeepCopy()
	ann := asCreated.GetAnnotations()
	ann[v1alpha1.AnnotationTrace] = allowance.FormatTrace(allowance.Trace{{APIVersion: "example.com/v1alpha1", Kind: "XDatabase", Name: "orders-x1", Generation: 1, User: alice}})
	asCreated.SetAnnotations(ann)
	// recorded is the composite whose KausalityComposed record says its
	// run at generation 4 left the named resources as stored.
	recorded := func(untouched ...string) *unstructured.Unstructured {
		u := xr.DeepCopy()
		u.Object["status"] = map[string]any{"conditions": []any{map[string]any{"type": v1alpha1.ConditionComposed, "status": "True",
			"message": allowance.Composed{Generation: 4, Untouched: untouched}.String()}}}
		return u
	}
	storedAs := bucket(map[string]any{"size": "small"}, AnnotationCompositionResourceName, "data")
	changedByAlice := xr.DeepCopy()
	ann = changedByAlice.GetAnnotations()
	ann[v1alpha1.AnnotationTrace] = allowance.FormatTrace(allowance.Trace{claimHop, xrHop})
	changedByAlice.SetAnnotations(ann)
	created := xr.DeepCopy()
	created.Object["status"] = map[string]any{"conditions": []any{map[string]any{"type": v1alpha1.ConditionCreated, "status": "True"}}}
	// addsABucket is created and holds an allowance to create a Bucket in
	// the cloud, as a rule that adds a resource issues it.
	addsABucket := created.DeepCopy()
	addsABucket.SetAnnotations(map[string]string{v1alpha1.AnnotationAllowances: allowance.Format(append(slices.Clone(xrAllowances),
		allowance.ExternalGrant("recorder.kausality.io", "Bucket", v1alpha1.VerbCreate, 4, allowance.Trace{claimHop, xrHop})))})

	cases := map[string]struct {
		reason    string
		old       *unstructured.Unstructured
		as        []allowance.Allowance
		composite *unstructured.Unstructured
		lookupErr error
		upgrades  bool
		want      string // a part of the refusal, "" when every allowance chains
		wantErr   bool
	}{
		"Chained":       {reason: "The resize continues the XR's allowance and grants no more.", old: stored, as: []allowance.Allowance{resize()}, composite: xr},
		"AlreadyStored": {reason: "An allowance already stored was checked when it was stamped.", old: bucket(nil, v1alpha1.AnnotationAllowances, allowance.Format([]allowance.Allowance{resize()})), as: []allowance.Allowance{resize()}},
		"ReleasedPending": {reason: "A pending allowance let through was checked when it was stamped, though the composite's allowance is used up for the resource by now.",
			old: bucket(nil, v1alpha1.AnnotationAllowances, allowance.Format([]allowance.Allowance{resize(func(a *allowance.Allowance) { a.Pending = pendingLarge })})),
			as:  []allowance.Allowance{resize(func(a *allowance.Allowance) { a.Generation = 5; a.Trace[2] = mrHop(5, allowance.Timestamp(now)) })}},
		"ReleasedWithAnotherValue": {reason: "A release must set the value the pending allowance was issued for: a step after Kausality must not swap it.",
			old:  bucket(nil, v1alpha1.AnnotationAllowances, allowance.Format([]allowance.Allowance{resize(func(a *allowance.Allowance) { a.Pending = pendingHuge })})),
			as:   []allowance.Allowance{resize(func(a *allowance.Allowance) { a.Generation = 5; a.Trace[2] = mrHop(5, allowance.Timestamp(now)) })},
			want: "releases a change of spec.forProvider.size to a value it was not issued for"},
		"ReleasedPendingForALaterGeneration": {reason: "A release must still fit the resource's next generation.",
			old: bucket(nil, v1alpha1.AnnotationAllowances, allowance.Format([]allowance.Allowance{resize(func(a *allowance.Allowance) { a.Pending = map[string]string{"spec.forProvider.size": "abc"} })})),
			as:  []allowance.Allowance{resize(func(a *allowance.Allowance) { a.Generation = 1e9 })}, want: "cannot be released"},
		"ReleasedRemoval": {reason: "A held removal is released by a write without the field.",
			old: bucket(nil, v1alpha1.AnnotationAllowances, allowance.Format([]allowance.Allowance{resize(func(a *allowance.Allowance) {
				a.Pending = map[string]string{"spec.forProvider.tags": allowance.Absent}
			})})),
			as: []allowance.Allowance{resize(func(a *allowance.Allowance) { a.Generation = 5; a.Trace[2] = mrHop(5, allowance.Timestamp(now)) })}},
		"NoParentHop": {reason: "An allowance must name where it comes from.", old: stored, composite: xr,
			as: []allowance.Allowance{resize(func(a *allowance.Allowance) { a.Trace = allowance.Trace{mrHop(6, ts)} })}, want: "has no parent hop"},
		"StampedInTheFuture": {reason: "One stamped in the future would never expire.", old: stored, composite: xr,
			as: []allowance.Allowance{resize(func(a *allowance.Allowance) { a.Trace[2] = mrHop(6, allowance.Timestamp(now.Add(time.Hour))) })}, want: "in the future"},
		"LaterGeneration": {reason: "One for a later generation than the next would never be consumed.", old: stored, composite: xr,
			as: []allowance.Allowance{resize(func(a *allowance.Allowance) { a.Generation = 1e9 })}, want: "is not one the object's next write"},
		"NoComposite": {reason: "Without a controlling composite there is nothing to chain to.", old: stored,
			as: []allowance.Allowance{resize()}, want: "no controlling composite"},
		"OtherParent": {reason: "The trace must name the controlling composite as parent.", old: stored, composite: xr,
			as: []allowance.Allowance{resize(func(a *allowance.Allowance) {
				h := xrHop
				h.Name = "payments-x1"
				a.Trace = allowance.Trace{claimHop, h, mrHop(6, ts)}
			})}, want: "not the controlling XDatabase orders-x1"},
		"NotChained": {reason: "A chain the composite holds no allowance for is forged.", old: stored, composite: xr,
			as: []allowance.Allowance{resize(func(a *allowance.Allowance) {
				h := claimHop
				h.Name = "other"
				a.Trace = allowance.Trace{h, xrHop, mrHop(6, ts)}
			})}, want: "does not chain to an unconsumed allowance"},
		"ComposedByTheXRRecord": {reason: "Once the composite records that its run at the allowance's generation left the resource as stored, the allowance is used up for it: a later change of it at that generation (a new Composition revision) has no cause.",
			old: storedAs, composite: recorded("data"), as: []allowance.Allowance{resize()}, want: "does not chain to an unconsumed allowance"},
		"XRRecordOfOthers": {reason: "The composite's record of other resources leaves its allowance to this one.",
			old: storedAs, composite: recorded("logs"), as: []allowance.Allowance{resize()}},
		"WiderVerbs": {reason: "A composed resource's allowance never grants more than its composite's.", old: stored, composite: xr,
			as: []allowance.Allowance{resize(func(a *allowance.Allowance) { a.Verbs = []string{v1alpha1.VerbUpdate, v1alpha1.VerbDelete} })}, want: "grants more than"},
		"ShipsAFieldItChanged": {reason: "A step after Kausality may not name a field no allowance let through.", old: stored, composite: xr,
			as: []allowance.Allowance{resize(func(a *allowance.Allowance) {
				a.Mutations = append(a.Mutations, v1alpha1.MutationBound{JSONPath: "spec.forProvider.region", Verbs: []v1alpha1.MutationVerb{v1alpha1.MutationMutate}})
			})}, want: "ships spec.forProvider.region"},
		"UpgradeNamesRevision": {reason: "An UpgradeAllowance naming the revision roots a chain of its own.", old: stored, as: []allowance.Allowance{upgraded}, upgrades: true},
		"UpgradeOtherRevision": {reason: "One not naming the revision covers nothing.", old: stored, as: []allowance.Allowance{upgraded}, want: "does not name the logic change recorded on it: composition revision"},
		"CreationWhileCreated": {reason: "A Create while the composite is created is bounded by the composite's initializing phase.", as: []allowance.Allowance{creation}, composite: xr},
		"CreationAfterCreated": {reason: "Once the composite has been created, a new resource's Create must chain: a step after Kausality cannot forge one.", as: []allowance.Allowance{creation}, composite: created,
			want: "does not chain"},
		"ChainedCreationAfterCreated": {reason: "A Create the composite's own allowance grants (a rule adding a resource) chains.", composite: addsABucket,
			as: []allowance.Allowance{allowance.ExternalGrant("recorder.kausality.io", "Bucket", v1alpha1.VerbCreate, 1, allowance.Trace{claimHop, xrHop, mrHop(1, ts)})}},
		"CreateOnAnUpdate": {reason: "A Create on an existing resource must chain like any other.", old: stored, composite: xr,
			as: []allowance.Allowance{allowance.ExternalGrant("recorder.kausality.io", "Bucket", v1alpha1.VerbCreate, 6, allowance.Trace{xrHop, mrHop(6, ts)})}, want: "does not chain"},
		"CompletionWhileCreated": {reason: "While the composite is created, its creation may insert a field the resource lacks.", old: stored, composite: xr,
			as: []allowance.Allowance{completion("spec.forProvider.region")}},
		"CompletionAfterCreation": {reason: "Once the composite has been Ready, an insertion needs a cause like any change.", old: stored, composite: created,
			as: []allowance.Allowance{completion("spec.forProvider.region")}, want: "does not chain"},
		"CompletionOfAFieldItHas": {reason: "A change of a value the resource has is no completion.", old: stored, composite: xr,
			as: []allowance.Allowance{completion("spec.forProvider.size")}, want: "does not chain"},
		"ComputedWhileCreatedUnchanged": {reason: "While the composite is created and nobody changed it, a value its pipeline computes may change (start at zero, raise once a dependency reports).", old: stored, composite: asCreated,
			as: []allowance.Allowance{computed("spec.forProvider.size")}},
		"ComputedAfterAChange": {reason: "Once a person changed the composite, a change of a value may be theirs: it must chain.", old: stored, composite: changedByAlice,
			as: []allowance.Allowance{computed("spec.forProvider.size")}, want: "does not chain"},
		"ComputedUntraced": {reason: "A composite without a trace tells nothing: the change must chain.", old: stored, composite: xr,
			as: []allowance.Allowance{computed("spec.forProvider.size")}, want: "does not chain"},
		"LookupFails": {reason: "A failed lookup is an error, not a refusal.", old: stored, as: []allowance.Allowance{resize()}, lookupErr: errBoom, wantErr: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			obj := bucket(map[string]any{"size": "large"})
			c := Chain{Old: tc.old, Obj: obj, Child: policy.ChildFor(obj.GroupVersionKind(), "buckets"), Now: now,
				Composite: func() (*unstructured.Unstructured, error) { return tc.composite, tc.lookupErr },
				Upgrades:  func(string) (bool, error) { return tc.upgrades, nil }}
			got, err := c.Refuse(tc.as)
			if (err != nil) != tc.wantErr {
				t.Fatalf("%s\nRefuse(...) error = %v, want error %t", tc.reason, err, tc.wantErr)
			}
			checkVerdict(t, tc.reason, "Refuse(...)", got, metrics.ReasonChain, tc.want)
		})
	}
}
