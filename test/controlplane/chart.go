package controlplane

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"

	xperrors "github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// chartRBAC are the RBAC templates of Crossplane's Helm chart: Crossplane's
// and the RBAC manager's ClusterRoles and bindings, and the aggregated
// crossplane-admin/edit/view/browse roles users are bound to.
var chartRBAC = []string{
	"clusterrole.yaml", "clusterrolebinding.yaml",
	"rbac-manager-clusterrole.yaml", "rbac-manager-clusterrolebinding.yaml",
	"rbac-manager-managed-clusterroles.yaml", "rbac-manager-allowed-provider-permissions.yaml",
}

// chartValues decide the chart's conditionals as its default values do.
var chartValues = map[string]bool{
	".Values.rbacManager.deploy":                         true,
	"not .Values.rbacManager.skipAggregatedClusterRoles": true,
	"not .Values.serviceAccount.create":                  false,
}

// renderChart renders the chart's RBAC templates with the default values
// and release namespace ns. It knows only the few directives those
// templates use and fails on any other, so a chart change cannot slip by.
func renderChart(module, ns string) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	for _, f := range chartRBAC {
		path := filepath.Join(module, "cluster", "charts", "crossplane", "templates", f)
		raw, err := os.ReadFile(path) //nolint:gosec // the crossplane module's own chart
		if err != nil {
			return nil, xperrors.Wrap(err, "cannot read Crossplane's chart")
		}
		y, err := renderTemplate(string(raw), ns)
		if err != nil {
			return nil, xperrors.Wrapf(err, "cannot render %s", path)
		}
		objs, err := decodeAll([]byte(y))
		if err != nil {
			return nil, xperrors.Wrapf(err, "cannot decode %s", path)
		}
		out = append(out, objs...)
	}
	return out, nil
}

func renderTemplate(t, ns string) (string, error) {
	var b strings.Builder
	// keep[i] says whether the lines of the i-th open conditional are kept.
	keep := []bool{true}
	for _, line := range strings.Split(t, "\n") {
		directive := strings.TrimSpace(line)
		if strings.HasPrefix(directive, "{{") {
			d := strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(strings.TrimPrefix(directive, "{{"), "-"), "}}"))
			switch {
			case strings.HasPrefix(d, "if "):
				v, ok := chartValues[strings.TrimSpace(strings.TrimPrefix(d, "if "))]
				if !ok {
					return "", xperrors.Errorf("unknown condition %q", d)
				}
				keep = append(keep, keep[len(keep)-1] && v)
				continue
			case d == "else":
				if len(keep) < 2 {
					return "", errors.New("else without if")
				}
				keep[len(keep)-1] = keep[len(keep)-2] && !keep[len(keep)-1]
				continue
			case d == "end":
				if len(keep) < 2 {
					return "", errors.New("end without if")
				}
				keep = keep[:len(keep)-1]
				continue
			case strings.HasPrefix(d, "include \"crossplane.labels\""):
				continue // Helm's bookkeeping labels; no rule depends on them
			}
		}
		if !keep[len(keep)-1] {
			continue
		}
		line = strings.ReplaceAll(line, `{{ template "crossplane.name" . }}`, "crossplane")
		line = strings.ReplaceAll(line, `{{ .Release.Namespace }}`, ns)
		if strings.Contains(line, "{{") {
			return "", xperrors.Errorf("unknown template directive in %q", line)
		}
		b.WriteString(line + "\n")
	}
	return b.String(), nil
}

// decodeAll decodes every object of a YAML stream.
func decodeAll(raw []byte) ([]*unstructured.Unstructured, error) {
	d := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
	var out []*unstructured.Unstructured
	for {
		u := &unstructured.Unstructured{}
		if err := d.Decode(&u.Object); errors.Is(err, io.EOF) {
			return out, nil
		} else if err != nil {
			return nil, err
		}
		if len(u.Object) > 0 {
			out = append(out, u)
		}
	}
}
