package policy

import (
	"fmt"
	"strings"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
)

// DeletionMessage is what a denied deletion of a protected object says, by
// the provider's webhook and by the ValidatingAdmissionPolicy it creates
// alike: what is protected, by which policies, and the annotation that
// lets it go.
func DeletionMessage(object string, policies []string) string {
	return fmt.Sprintf("%s is protected from deletion by AllowancePolicy %s; set the annotation %s: \"true\" on it to delete it",
		object, strings.Join(policies, ", "), v1alpha1.AnnotationAllowDelete)
}
