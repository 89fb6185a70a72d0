//go:build !race

package api_test

// raceDetector: the race detector is off.
const raceDetector = false
