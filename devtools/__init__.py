"""Development tooling of the repository (not installed): the demo and a throwaway local Airflow for it and the tests."""
