// Package derivation reads a Composition's patch-and-transform steps as data
// and turns them into an AllowancePolicy (Derive), or compares them with
// the AllowancePolicies that exist for its composite kind (Check). Every
// rule a platform team writes mirrors a patch by hand, and the two drift
// apart silently: a new patch without a rule surfaces weeks later as a
// withheld change, a rule wider than its patch is a hole nobody sees.
//
// It is pure: no I/O, no clients. The composed kinds' plurals come through
// a Resolver, which the CLI backs with the API server or CRD files, so the
// same derivation runs in CI and against a cluster.
//
// What a patch-and-transform step does is read structurally: each
// FromCompositeFieldPath and CombineFromComposite patch (patch sets
// expanded), and each patch from the environment where the step's own
// environment patches copy an XR field there, is an edge from an XR field
// to a composed resource's field.
// Any other function step changes composed resources in ways only running
// it reveals: FromExperiment reads the renders of a baseline XR and of one
// perturbed XR per field (experiment.go; the CLI runs crossplane render),
// else the output says so rather than guessing. A kro
// ResourceGraphDefinition states its graph in ${schema.spec.…} references,
// which ReadGraph reads (kro.go). All three end in a Model, so one rule
// builder writes every derived policy.
package derivation
