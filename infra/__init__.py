"""Ground floor: the local Kafka broker, topic declarations, Kafka client settings."""
