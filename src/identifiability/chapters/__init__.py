"""The chapter contract: the list of chapters, their parameters, the pre-flight and the execution of a chapter."""
