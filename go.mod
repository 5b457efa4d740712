module github.com/Azure/eno-tombstone-recovery

go 1.25.0
