module github.com/Azure/eno-tombstone-recovery/tools

go 1.26.0

tool github.com/maxbrunsfeld/counterfeiter/v6

require (
	github.com/maxbrunsfeld/counterfeiter/v6 v6.14.0 // indirect
	golang.org/x/mod v0.41.0 // indirect
	golang.org/x/sync v0.23.0 // indirect
	golang.org/x/text v0.42.0 // indirect
	golang.org/x/tools v0.50.0 // indirect
)
