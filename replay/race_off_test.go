//go:build !race

package replay_test

// raceOn: the race detector is on (its tests run fewer lines).
const raceOn = false
