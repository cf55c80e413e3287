//go:build !race

package ringtail

const raceEnabled = false
