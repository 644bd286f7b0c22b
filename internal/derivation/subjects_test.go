package derivation

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
	"github.com/kausality-io/kausality-crossplane/internal/policy"
)

func TestSubjects(t *testing.T) {
	got, err := Subjects([]string{"alice"}, []string{"platform-team"}, []string{"ci/deployer"}, []string{"crossplane-system/crossplane"})
	if err != nil {
		t.Fatal(err)
	}
	want := []v1alpha1.Subject{
		{Kind: v1alpha1.SubjectUser, Name: "alice", MayInitiate: true},
		{Kind: v1alpha1.SubjectGroup, Name: "platform-team", MayInitiate: true},
		{Kind: v1alpha1.SubjectServiceAccount, Namespace: "ci", Name: "deployer", MayInitiate: true},
		{Kind: v1alpha1.SubjectServiceAccount, Namespace: "crossplane-system", Name: "crossplane"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Subjects(...): -want, +got:\n%s", diff)
	}
	for _, bad := range []string{"deployer", "ci/", "/deployer", "CI/deployer", "ci/deployer/x", "ci/de ployer"} {
		if _, err := ParseServiceAccount(bad); err == nil {
			t.Errorf("ParseServiceAccount(%q): no error", bad)
		}
	}
	for _, bad := range []string{"", " alice", "alice\n"} {
		if _, err := Subjects([]string{bad}, nil, nil, nil); err == nil {
			t.Errorf("Subjects(user %q): no error", bad)
		}
	}
	if _, err := ParseDeleting("keep"); err == nil {
		t.Error(`ParseDeleting("keep"): no error`)
	}
}

// FuzzParseServiceAccount: whatever a user passes, the parser either
// rejects it or returns a subject that compiles and names the service
// account namespace/name, both non-empty and without a slash.
func FuzzParseServiceAccount(f *testing.F) {
	for _, s := range []string{"ci/deployer", "crossplane-system/crossplane", "a/b/c", "/", "", "ns/ä", "ns/a.b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sa, err := ParseServiceAccount(s)
		if err != nil {
			return
		}
		if sa.Namespace+"/"+sa.Name != s || strings.Contains(sa.Namespace, "/") || strings.Contains(sa.Name, "/") || sa.Name == "" || sa.Namespace == "" {
			t.Fatalf("ParseServiceAccount(%q) = %+v", s, sa)
		}
		p := v1alpha1.AllowancePolicy{Spec: v1alpha1.AllowancePolicySpec{For: v1alpha1.ObjectKind{Kind: "X"}, Subjects: []v1alpha1.Subject{sa}}}
		if _, err := policy.Compile(&p); err != nil {
			t.Fatalf("ParseServiceAccount(%q): the subject does not compile: %v", s, err)
		}
	})
}

// FuzzSubjects: a user or group name is either rejected or kept as given,
// and the subject compiles and may initiate.
func FuzzSubjects(f *testing.F) {
	for _, s := range []string{"alice", "system:masters", " bob", "x\n", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ss, err := Subjects([]string{s}, []string{s}, nil, nil)
		if err != nil {
			return
		}
		for _, sub := range ss {
			if sub.Name != s || !sub.MayInitiate {
				t.Fatalf("Subjects(%q) = %+v", s, ss)
			}
		}
		p := v1alpha1.AllowancePolicy{Spec: v1alpha1.AllowancePolicySpec{For: v1alpha1.ObjectKind{Kind: "X"}, Subjects: ss}}
		if _, err := policy.Compile(&p); err != nil {
			t.Fatalf("Subjects(%q): the subjects do not compile: %v", s, err)
		}
	})
}
