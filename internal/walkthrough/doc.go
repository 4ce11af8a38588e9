// Package walkthrough holds the test that runs docs/walkthrough.md as printed
// against each example agent of examples/ (the @a2a-js/sdk one and the
// a2a-go one). Its code is in its tests.
package walkthrough
