package broker

import (
	"time"
	_ "time/tzdata" // America/New_York must resolve on machines without zoneinfo
)

// NewYork is the exchange's time zone: trading days, the daily-loss reset and
// time windows are all counted in it.
var NewYork = mustLoad("America/New_York")

func mustLoad(name string) *time.Location {
	loc, err := time.LoadLocation(name)
	if err != nil {
		panic("broker: load " + name + ": " + err.Error())
	}
	return loc
}

// Day returns the New York calendar day of t as "2006-01-02". A day starts at
// 00:00 America/New_York.
func Day(t time.Time) string { return t.In(NewYork).Format(time.DateOnly) }
