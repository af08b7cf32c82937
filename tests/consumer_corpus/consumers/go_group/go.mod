module idemcorpus/gogroup

go 1.22

require (
	github.com/mattn/go-sqlite3 v1.14.53
	github.com/rabbitmq/amqp091-go v1.16.0
)
