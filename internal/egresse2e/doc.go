// Package egresse2e holds the end-to-end tests of egress mode (issue 22,
// docs/egress.md): real `writ serve` processes on the delegating and the
// receiving side of every hop, `writ sts`, and the @a2a-js/sdk agents of
// testdata/peers/js, one delegation followed across three writs; and the
// test that runs docs/egress-walkthrough.md as printed. Its code is in its
// tests.
package egresse2e
