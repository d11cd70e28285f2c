"""Pure analysis over sample-record DataFrames: no servers, no printing."""
