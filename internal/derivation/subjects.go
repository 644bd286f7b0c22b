package derivation

import (
	"strings"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
)

// Subjects builds a policy's subjects from command-line values. Users,
// groups and service accounts may initiate changes; propagators are
// service accounts that may only carry a chain on (Crossplane's own,
// writing a composed XR), as the corpus policies name Crossplane. A
// service account is written namespace/name.
func Subjects(users, groups, serviceAccounts, propagators []string) ([]v1alpha1.Subject, error) {
	var out []v1alpha1.Subject
	for _, u := range users {
		if err := plainName(u); err != nil {
			return nil, errors.Wrapf(err, "user %q", u)
		}
		out = append(out, v1alpha1.Subject{Kind: v1alpha1.SubjectUser, Name: u, MayInitiate: true})
	}
	for _, g := range groups {
		if err := plainName(g); err != nil {
			return nil, errors.Wrapf(err, "group %q", g)
		}
		out = append(out, v1alpha1.Subject{Kind: v1alpha1.SubjectGroup, Name: g, MayInitiate: true})
	}
	for i, list := range [][]string{serviceAccounts, propagators} {
		for _, s := range list {
			sa, err := ParseServiceAccount(s)
			if err != nil {
				return nil, err
			}
			sa.MayInitiate = i == 0
			out = append(out, sa)
		}
	}
	return out, nil
}

// ParseServiceAccount parses namespace/name into a ServiceAccount subject,
// both parts as Kubernetes validates them, since a subject that names no
// possible service account would silently match nobody.
func ParseServiceAccount(s string) (v1alpha1.Subject, error) {
	ns, name, ok := strings.Cut(s, "/")
	if !ok {
		return v1alpha1.Subject{}, errors.Errorf("service account %q is not namespace/name", s)
	}
	if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
		return v1alpha1.Subject{}, errors.Errorf("service account %q: namespace: %s", s, strings.Join(errs, "; "))
	}
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return v1alpha1.Subject{}, errors.Errorf("service account %q: name: %s", s, strings.Join(errs, "; "))
	}
	return v1alpha1.Subject{Kind: v1alpha1.SubjectServiceAccount, Namespace: ns, Name: name}, nil
}

// plainName rejects user and group names no API server authenticates:
// empty, or with surrounding space or control characters (a pasted
// newline).
func plainName(s string) error {
	if s == "" {
		return errors.New("is empty")
	}
	if strings.TrimSpace(s) != s || strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return errors.New("has surrounding space or control characters")
	}
	return nil
}

// ParseDeleting parses the --deleting flag.
func ParseDeleting(s string) (Deleting, error) {
	switch d := Deleting(s); d {
	case DeletingOrphan, DeletingDelete:
		return d, nil
	case "":
		return DeletingOrphan, nil
	}
	return "", errors.Errorf("deleting %q is not orphan or delete", s)
}
