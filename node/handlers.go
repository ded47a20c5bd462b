package node

// apiHandlers lists every API the broker serves, with the versions served.
// The ranges follow what clients still send: kafka-python opens with
// ApiVersions v0 and Metadata v0/v1, segmentio/kafka-go uses old group and
// commit versions. Produce below v3 (message formats v0 and v1) is refused,
// as Kafka 4 does.
func (b *Broker) apiHandlers() []apiHandler {
	return []apiHandler{
		{key: 0, min: 3, max: 13, handle: b.handleProduce},
		{key: 1, min: 4, max: 18, handle: b.handleFetch},
		{key: 2, min: 0, max: 10, handle: b.handleListOffsets},
		{key: 3, min: 0, max: 12, handle: b.handleMetadata},
		{key: 8, min: 0, max: 9, handle: b.handleOffsetCommit},
		{key: 9, min: 0, max: 9, handle: b.handleOffsetFetch},
		{key: 10, min: 0, max: 6, handle: b.handleFindCoordinator},
		{key: 11, min: 0, max: 9, handle: b.handleJoinGroup},
		{key: 12, min: 0, max: 4, handle: b.handleHeartbeat},
		{key: 13, min: 0, max: 5, handle: b.handleLeaveGroup},
		{key: 14, min: 0, max: 5, handle: b.handleSyncGroup},
		{key: 15, min: 0, max: 6, handle: b.handleDescribeGroups},
		{key: 16, min: 0, max: 5, handle: b.handleListGroups},
		{key: 18, min: 0, max: 4, handle: b.handleApiVersions},
		{key: 19, min: 0, max: 7, handle: b.forControllers(b.handleCreateTopics)},
		{key: 20, min: 0, max: 6, handle: b.forControllers(b.handleDeleteTopics)},
		{key: 21, min: 0, max: 2, handle: b.handleDeleteRecords},
		{key: 22, min: 0, max: 5, handle: b.handleInitProducerID},
		{key: 23, min: 0, max: 4, handle: b.handleOffsetForLeaderEpoch},
		{key: 32, min: 0, max: 4, handle: b.handleDescribeConfigs},
		{key: 33, min: 0, max: 2, handle: b.forControllers(b.handleAlterConfigs)},
		{key: 37, min: 0, max: 3, handle: b.forControllers(b.handleCreatePartitions)},
		{key: 42, min: 0, max: 2, handle: b.handleDeleteGroups},
		{key: 43, min: 0, max: 2, handle: b.forControllers(b.handleElectLeaders)},
		{key: 44, min: 0, max: 1, handle: b.forControllers(b.handleIncrementalAlterConfigs)},
		{key: 45, min: 0, max: 1, handle: b.forControllers(b.handleAlterPartitionReassignments)},
		{key: 46, min: 0, max: 0, handle: b.forControllers(b.handleListPartitionReassignments)},
		{key: 47, min: 0, max: 0, handle: b.handleOffsetDelete},
		{key: 55, min: 0, max: 2, handle: b.handleDescribeQuorum},
		{key: 56, min: 0, max: 3, handle: b.handleAlterPartition},
		{key: 58, min: 0, max: 0, handle: b.handleEnvelope},
		{key: 60, min: 0, max: 2, handle: b.handleDescribeCluster},
		{key: 62, min: 0, max: 4, handle: b.handleBrokerRegistration},
		{key: 63, min: 0, max: 1, handle: b.handleBrokerHeartbeat},
		{key: 67, min: 0, max: 0, handle: b.handleAllocateProducerIDs},
		{key: 68, min: 0, max: 1, handle: b.handleConsumerGroupHeartbeat},
		{key: 69, min: 0, max: 1, handle: b.handleConsumerGroupDescribe},
		{key: 75, min: 0, max: 0, handle: b.handleDescribeTopicPartitions},
		{key: 80, min: 0, max: 1, handle: b.forVoterChanges(b.handleAddRaftVoter)},
		{key: 81, min: 0, max: 0, handle: b.forVoterChanges(b.handleRemoveRaftVoter)},
	}
}
