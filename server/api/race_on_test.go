//go:build race

package api_test

// raceDetector: the race detector is on; timing measurements skip.
const raceDetector = true
