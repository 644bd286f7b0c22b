package kinds

// Error messages, one constant each in crossplane-runtime's style, so tests
// compare errors by what they say and a message is changed in one place.
const (
	errFmtWatch = "cannot watch %s"
)
