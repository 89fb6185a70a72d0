//go:build race

package api_test

// raceDetector: timing assertions are reported only (the race detector
// slows the code under test several times).
const raceDetector = true
