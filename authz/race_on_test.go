//go:build race

package authz

// raceEnabled: the race detector slows OPA's evaluator tenfold; the generated
// matrices are sampled smaller under it.
const raceEnabled = true
