package allowance

// ObservedGeneration reads an object's observed generation the way
// crossplane-runtime v2 reports it: status.observedGeneration when present,
// else the observedGeneration of the Synced condition. ok is false when the
// object reports neither, i.e. no controller has reconciled it yet, or
// when the Synced condition is not True: crossplane-runtime stamps the
// generation on a failed (ReconcileError) or paused (ReconcilePaused)
// reconcile too, but nothing of that generation was applied, so it must
// not consume an allowance.
func ObservedGeneration(content map[string]any) (int64, bool) {
	status, _ := content["status"].(map[string]any)
	if g, ok := asInt(status["observedGeneration"]); ok {
		return g, true
	}
	conds, _ := status["conditions"].([]any)
	for _, c := range conds {
		cm, _ := c.(map[string]any)
		if cm["type"] != "Synced" {
			continue
		}
		if cm["status"] != "True" {
			return 0, false
		}
		if g, ok := asInt(cm["observedGeneration"]); ok {
			return g, true
		}
	}
	return 0, false
}

func asInt(v any) (int64, bool) {
	switch n := v.(type) {
	case int64:
		return n, true
	case int:
		return int64(n), true
	case int32:
		return int64(n), true
	case float64:
		return int64(n), n == float64(int64(n))
	}
	return 0, false
}
