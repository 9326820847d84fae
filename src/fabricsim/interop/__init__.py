"""Other tools' formats: nccl-tests logs in and out (:mod:`.nccl_tests`)."""
