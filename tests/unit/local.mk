# unit tests (Check)
