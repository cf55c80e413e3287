//go:build !race

package api_test

// raceEnabled is true under -race, whose shadow memory multiplies RSS.
const raceEnabled = false
